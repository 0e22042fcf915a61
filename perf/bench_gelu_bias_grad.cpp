// The MLP's GELU backward + fc1 bias gradient at GPT-2 124M ([32768 tokens = micro-batch 32 x seq 1024, ffn 3072])
// and GPT 1.3B ([16384 = 8 x 2048, ffn 8192]) training sizes, bf16: ops::gelu_backward_bias_grad (one kernel,
// kernels/gelu_bias_grad_kernels.cu) against ATen's gelu_backward + sum(0), timed alternately in the same iterations.
// Counters: fused_ms, aten_ms, speedup (aten / fused), GB/s (fused: read d_act and pre, write d_pre; ATen: the same
// plus the sum's second read of d_pre).
// BM_BiasGradVsAtenSum: ops::bias_grad (the column sums alone, a linear layer's bias gradient) against ATen's sum(0).
//   build/perf/bench_gelu_bias_grad [--benchmark_min_time=1]     (reports an error row without a CUDA device)
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "bench_alternate.h"
#include "ops/gelu_bias_grad.h"

using namespace megaton;

namespace {

void BM_GeluBiasGradFusedVsAten(benchmark::State& state) {
  if (!torch::cuda::is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const int64_t tokens = state.range(0), f = state.range(1);
  const auto o = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  torch::Tensor pre = torch::randn({tokens, f}, o), d_act = torch::randn({tokens, f}, o);
  const double bytes = 3.0 * double(tokens * f) * 2.0;
  perf::time_alternately(
      state, [] {}, [&] { ops::gelu_backward_bias_grad(d_act, pre); },
      [&] { ops::gelu_backward_bias_grad_aten(d_act, pre); }, bytes, bytes * 4.0 / 3.0);
}

// A linear layer's bias gradient: ops::bias_grad (the same kernel without the GELU) against ATen's sum(0), at the
// 124M and 1.3B QKV ([T, 3h]) and dense/fc2 ([T, h]) widths. Both read dy once; times are for 20 calls.
void BM_BiasGradVsAtenSum(benchmark::State& state) {
  if (!torch::cuda::is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const int64_t tokens = state.range(0), n = state.range(1);
  const auto o = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  torch::Tensor dy = torch::randn({tokens, n}, o);
  constexpr int kCalls = 20;  // per timing: one call is tens of microseconds, near the host timer's own cost
  const double bytes = double(tokens * n) * 2.0 * kCalls;
  perf::time_alternately(
      state, [] {},
      [&] {
        for (int i = 0; i < kCalls; ++i) ops::bias_grad(dy);
      },
      [&] {
        for (int i = 0; i < kCalls; ++i) dy.sum(0);
      },
      bytes, bytes);
}

}  // namespace

BENCHMARK(BM_BiasGradVsAtenSum)
    ->Args({32768, 2304})
    ->Args({32768, 768})
    ->Args({16384, 6144})
    ->Args({16384, 2048})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GeluBiasGradFusedVsAten)
    ->Args({32768, 3072})
    ->Args({16384, 8192})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
