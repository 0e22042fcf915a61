// The MLP's GELU backward + fc1 bias gradient at GPT-2 124M ([32768 tokens = micro-batch 32 x seq 1024, ffn 3072])
// and GPT 1.3B ([16384 = 8 x 2048, ffn 8192]) training sizes, bf16: ops::gelu_backward_bias_grad (one kernel,
// kernels/gelu_bias_grad_kernels.cu) against ATen's gelu_backward + sum(0), timed alternately in the same iterations.
// Counters: fused_ms, aten_ms, speedup (aten / fused), GB/s (fused: read d_act and pre, write d_pre; ATen: the same
// plus the sum's second read of d_pre).
// BM_BiasGradVsAtenSum: ops::bias_grad (the column sums alone, a linear layer's bias gradient) against ATen's sum(0).
// BM_QkvInterleaveVsStackAndSum: the attention's QKV gradient and QKV bias gradient in one pass
// (ops::qkv_interleave_bias_grad_fused, what ops::split_qkv's backward runs) against torch::stack + ops::bias_grad.
// BM_GeluBiasGradTuning: the GELU kernel at each compiled kernels::GeluBiasGradTuning (range 2: its index in
// kernels::gelu_bias_grad_tunings(), 0 the default), GPU time per call over back-to-back calls (CUDA events).
//   build/perf/bench_gelu_bias_grad [--benchmark_min_time=1]     (reports an error row without a CUDA device)
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "bench_alternate.h"
#include "bench_gpu_seconds.h"
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

void BM_QkvInterleaveVsStackAndSum(benchmark::State& state) {
  if (perf::skip_without_cuda(state)) return;
#ifdef MEGATON_HAVE_CUDA
  const std::vector<int64_t> shape = {state.range(0), state.range(1), state.range(2), state.range(3)};  // [s, b, np, d]
  const auto o = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  torch::Tensor dq = torch::randn(shape, o), dk = torch::randn(shape, o), dv = torch::randn(shape, o);
  const int64_t cols = 3 * shape[2] * shape[3];
  constexpr int kCalls = 10;
  const double bytes = double(dq.numel()) * 3 * 2 * 2 * kCalls;  // read the three parts, write d_qkv
  perf::time_alternately(
      state, [] {},
      [&] {
        for (int i = 0; i < kCalls; ++i) ops::qkv_interleave_bias_grad_fused(dq, dk, dv);
      },
      [&] {
        for (int i = 0; i < kCalls; ++i) ops::bias_grad(torch::stack({dq, dk, dv}, 3).view({-1, cols}));
      },
      bytes, bytes * 1.5);
#endif
}

void BM_GeluBiasGradTuning(benchmark::State& state) {
  if (perf::skip_without_cuda(state)) return;
#ifdef MEGATON_HAVE_CUDA
  const int64_t tokens = state.range(0), f = state.range(1);
  const kernels::GeluBiasGradTuning tuning = kernels::gelu_bias_grad_tunings().at(state.range(2));
  const auto o = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  torch::Tensor pre = torch::randn({tokens, f}, o), d_act = torch::randn({tokens, f}, o);
  auto call = [&] { ops::gelu_backward_bias_grad_fused(d_act, pre, tuning); };
  constexpr int kReps = 12;    // calls per timing (GPT-2 124M runs 12 per step)
  perf::gpu_seconds(call, 2);  // warm-up
  double t = 0;
  int64_t n = 0;
  for (auto _ : state) {
    const double s = perf::gpu_seconds(call, kReps);
    t += s, ++n;
    state.SetIterationTime(s);
  }
  const double bytes = 3.0 * double(tokens * f) * 2.0;  // d_act and pre read, d_pre written, bf16
  state.counters["us"] = t / double(n) * 1e6;
  state.counters["GBps"] = bytes * double(n) / t / 1e9;
  state.SetLabel("rows " + std::to_string(tuning.rows_in_flight) + " blocks " + std::to_string(tuning.blocks_per_sm));
#endif
}

void tuning_args(benchmark::internal::Benchmark* b) {
#ifdef MEGATON_HAVE_CUDA
  for (int64_t v = 0; v < static_cast<int64_t>(kernels::gelu_bias_grad_tunings().size()); ++v) {
    b->Args({32768, 3072, v});
    b->Args({16384, 8192, v});
  }
#else
  b->Args({32768, 3072, 0});
#endif
}

}  // namespace

BENCHMARK(BM_GeluBiasGradTuning)->Apply(tuning_args)->UseManualTime()->Iterations(30)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_QkvInterleaveVsStackAndSum)  // {s, b, np, d}: GPT-2 124M, GPT 1.3B
    ->Args({1024, 32, 12, 64})
    ->Args({2048, 8, 16, 128})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
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
