// The transformer MLP (fc1 -> GELU (tanh) -> fc2, with biases) forward + backward through autograd at GPT-2 124M
// ([32768 tokens = micro-batch 32 x seq 1024, h 768, ffn 3072]) and GPT 1.3B ([16384 = 8 x 2048, 2048, 8192]) training
// sizes, bf16: ops::bias_gelu_mlp (bias + GELU in fc1's GEMM epilogue, GELU's derivative and the bias gradients in
// the backward GEMMs' epilogues, cuBLASLt) against torch::linear / torch::gelu / torch::linear (ATen's kernels, as
// the model runs with --no-gemm-epilogue-fusion), timed alternately in the same iterations. Counters: aten_ms,
// fused_ms, speedup (aten / fused); the benchmark's own time is the fused path's.
//   build/perf/bench_gemm_epilogue [--benchmark_min_time=1]     (reports an error row without a CUDA device)
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "bench_alternate.h"
#include "ops/gemm_epilogue.h"

using namespace megaton;

namespace {

void BM_BiasGeluMlpFusedVsAten(benchmark::State& state) {
  if (!torch::cuda::is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const int64_t tokens = state.range(0), h = state.range(1), f = 4 * h;
  const auto o = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  auto param = [&](std::vector<int64_t> shape, double scale) {
    return (torch::randn(shape, o) * scale).requires_grad_();
  };
  torch::Tensor x = torch::randn({tokens, h}, o).requires_grad_();
  torch::Tensor w1 = param({f, h}, 0.02), b1 = param({f}, 0.02), w2 = param({h, f}, 0.02), b2 = param({h}, 0.02);
  torch::Tensor dy = torch::randn({tokens, h}, o);
  if (!ops::gemm_epilogue_supported({x, w1, b1, w2, b2})) {
    state.SkipWithError("ops::gemm_epilogue_supported: false (not a CUDA build?)");
    return;
  }
  auto clear = [&] {
    for (torch::Tensor* t : {&x, &w1, &b1, &w2, &b2}) t->mutable_grad().reset();
  };
  perf::time_alternately(
      state, clear, [&] { ops::bias_gelu_mlp(x, w1, b1, w2, b2).backward(dy); },
      [&] { torch::linear(torch::gelu(torch::linear(x, w1, b1), "tanh"), w2, b2).backward(dy); }, 0, 0);
}

}  // namespace

BENCHMARK(BM_BiasGeluMlpFusedVsAten)
    ->Args({32768, 768})
    ->Args({16384, 2048})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
