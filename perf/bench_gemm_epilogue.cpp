// The transformer MLP (fc1 -> GELU (tanh) -> fc2, with biases) forward + backward through autograd at GPT-2 124M
// ([32768 tokens = micro-batch 32 x seq 1024, h 768, ffn 3072]) and GPT 1.3B ([16384 = 8 x 2048, 2048, 8192]) training
// sizes, bf16: ops::bias_gelu_mlp (the model's MLP; third argument, bits: 1 bias + GELU in fc1's GEMM epilogue, the
// default; 2 the GELU derivative in fc2's input-gradient GEMM epilogue, the default; without 2 GELU
// backward + fc1 bias gradient in one kernel) against torch::linear / torch::gelu / torch::linear (ATen's kernels),
// timed alternately in the same iterations.
// Counters: aten_ms, fused_ms, speedup (aten / fused); the benchmark's own time is the fused path's.
// BM_LinearGeluAux: the GELU_AUX_BIAS epilogue alone (ops/cublaslt_gemm.h) against the ATen ops it replaces.
// BM_DgeluThenBiasGrad: the DGELU epilogue (no bias gradient) + ops::bias_grad, what the MLP's backward runs by
// default, against mm + the GELU-backward and bias-gradient kernel (--no-gemm-dgelu-epilogue).
//   build/perf/bench_gemm_epilogue [--benchmark_min_time=1]     (reports an error row without a CUDA device)
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "bench_alternate.h"
#include "ops/cublaslt_gemm.h"
#include "ops/gelu_bias_grad.h"
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
      state, clear,
      [&] {
        const ops::MlpEpilogues e{(state.range(2) & 1) != 0, (state.range(2) & 2) != 0};
        ops::bias_gelu_mlp(x, w1, b1, w2, b2, e).backward(dy);
      },
      [&] { torch::linear(torch::gelu(torch::linear(x, w1, b1), "tanh"), w2, b2).backward(dy); }, 0, 0);
}

#ifdef MEGATON_HAVE_CUDA
// x [T, h], w1 [f, h], b1 [f], w2 [h, f], dy [T, h] bf16 on the GPU, f = 4h; false (and an error row) without CUDA.
struct Pieces {
  torch::Tensor x, w1, b1, w2, dy, pre;
};

bool make_pieces(benchmark::State& state, Pieces& p) {
  if (!torch::cuda::is_available()) {
    state.SkipWithError("no CUDA device");
    return false;
  }
  const int64_t tokens = state.range(0), h = state.range(1), f = 4 * h;
  const auto o = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  p = {torch::randn({tokens, h}, o),   torch::randn({f, h}, o) * 0.02, torch::randn({f}, o) * 0.02,
       torch::randn({h, f}, o) * 0.02, torch::randn({tokens, h}, o),   torch::randn({tokens, f}, o)};
  return true;
}

void BM_LinearGeluAux(benchmark::State& state) {
  Pieces p;
  if (!make_pieces(state, p)) return;
  torch::Tensor act = torch::empty_like(p.pre), pre = torch::empty_like(p.pre);
  perf::time_alternately(
      state, [] {}, [&] { ops::lt::linear_gelu_aux(p.x, p.w1, p.b1, act, pre); },
      [&] { torch::gelu(torch::linear(p.x, p.w1, p.b1), "tanh"); }, 0, 0);
}

void BM_DgeluThenBiasGrad(benchmark::State& state) {
  Pieces p;
  if (!make_pieces(state, p)) return;
  torch::Tensor d_pre = torch::empty_like(p.pre);
  perf::time_alternately(
      state, [] {},
      [&] {
        ops::lt::linear_dgelu(p.dy, p.w2, p.pre, d_pre);
        ops::bias_grad(d_pre);
      },
      [&] { ops::gelu_backward_bias_grad(torch::mm(p.dy, p.w2), p.pre); }, 0, 0);
}

#endif

}  // namespace

#ifdef MEGATON_HAVE_CUDA
BENCHMARK(BM_LinearGeluAux)->Args({32768, 768})->Args({16384, 2048})->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DgeluThenBiasGrad)
    ->Args({32768, 768})
    ->Args({16384, 2048})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
#endif
BENCHMARK(BM_BiasGeluMlpFusedVsAten)  // {tokens, h, epilogues: 1 fc1 forward, 2 fc2 input gradient (DGELU)}
    ->Args({32768, 768, 1})
    ->Args({16384, 2048, 1})
    ->Args({32768, 768, 3})
    ->Args({16384, 2048, 3})
    ->Args({32768, 768, 0})
    ->Args({16384, 2048, 0})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
