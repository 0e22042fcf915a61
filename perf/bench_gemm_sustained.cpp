// The 1.3B step's tuned GEMMs with each algorithm cuBLASLt offers, timed *sustained*: every algorithm runs back to back
// for kWarmSeconds first, so the H200 reaches its 700 W cap and lowers its clock as in a long training run, then is
// timed over kTimedSeconds. A power-capped step's time follows the energy its kernels spend, not their speed at full
// clock: bench_gemm_algos.cpp (short bursts at ~1980 MHz) and --gemm-autotune (timed inside training, at the clock the
// whole step's power sets) rank algorithms by the latter. This ranks them by the former.
//   BM_SustainedWgrad/{in, out, tokens}  a weight gradient into its fp32 main grad (beta 0): cublasGemmEx (what
//   training
//                                        runs) against cuBLASLt's offered algorithms (ops::lt::wgrad_fp32)
//   BM_SustainedGeluAux/{tokens, h}      fc1 with bias + GELU in the epilogue (ops::lt::linear_gelu_aux)
//   BM_SustainedDgelu/{tokens, h}        fc2's input gradient times the GELU derivative (ops::lt::linear_dgelu)
// Counters: base_ms (what training runs: cublasGemmEx for the weight gradients, the heuristic's first otherwise),
// best_ms, best_algo, algos (timed: the heuristic's first 8 at most), gain (base_ms / best_ms), base_tflops,
// best_tflops; every algorithm's sustained ms as a_<k>_ms.
//   build/perf/bench_gemm_sustained     (an error row without CUDA)
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <limits>
#include <string>

#include "bench_gemm_inputs.h"
#include "bench_gpu_seconds.h"
#include "ops/cublaslt_gemm.h"
#include "ops/gemm_tuner.h"
#include "ops/linear.h"

using namespace megaton;

namespace {

#ifdef MEGATON_HAVE_CUDA
constexpr double kWarmSeconds = 0.6;   // to the power cap: the clock settles within ~0.3 s of a 700 W load
constexpr double kTimedSeconds = 0.4;  // then timed with CUDA events over this long
constexpr int kMaxAlgos = 8;           // the heuristic's first 8 (of up to 16): ~1 s each

// Seconds per call of fn at the clock the power cap sets for it.
double sustained_seconds(const std::function<void()>& fn) {
  using Clock = std::chrono::steady_clock;
  fn();
  torch::cuda::synchronize();
  const auto t0 = Clock::now();
  int calls = 0;
  while (std::chrono::duration<double>(Clock::now() - t0).count() < kWarmSeconds) {
    for (int i = 0; i < 8; ++i) fn();
    calls += 8;
    torch::cuda::synchronize();
  }
  const double per_call = kWarmSeconds / calls;
  const int reps = std::max(8, static_cast<int>(kTimedSeconds / per_call));
  return perf::gpu_seconds(fn, reps);
}

// base: what training runs; run(a): the a-th offered algorithm, a < count. Sets the counters (see the header).
void rank_algos(benchmark::State& state, double flops, const std::function<void()>& base, int count,
                const std::function<void(int)>& run) {
  count = std::min(count, kMaxAlgos);
  for (auto _ : state) {
    const double b = sustained_seconds(base);
    double best = std::numeric_limits<double>::infinity();
    int best_algo = -1;
    for (int a = 0; a < count; ++a) {
      const double s = sustained_seconds([&] { run(a); });
      state.counters["a_" + std::to_string(a) + "_ms"] = s * 1e3;
      if (s < best) best = s, best_algo = a;
    }
    state.SetIterationTime(b);
    state.counters["base_ms"] = b * 1e3;
    state.counters["best_ms"] = best * 1e3;
    state.counters["best_algo"] = best_algo;
    state.counters["algos"] = count;
    state.counters["gain"] = b / best;
    state.counters["base_tflops"] = flops / b * 1e-12;
    state.counters["best_tflops"] = flops / best * 1e-12;
  }
}

#endif

void BM_SustainedWgrad(benchmark::State& state) {
  if (perf::skip_without_cuda(state)) return;
#ifdef MEGATON_HAVE_CUDA
  const int64_t in = state.range(0), out = state.range(1), tokens = state.range(2);
  perf::WgradInputs g(in, out, tokens);
  torch::Tensor &dy = g.dy, &x = g.x, &main = g.main;
  int count = 0;
  if (!ops::lt::wgrad_fp32(dy, x, main, true, 0, &count)) return state.SkipWithError("no cuBLASLt algorithm");
  ops::gemm_tuner().set_enabled(false);  // training's default: cublasGemmEx
  rank_algos(
      state, 2.0 * double(in * out) * double(tokens), [&] { ops::accumulate_weight_grad_cuda(main, dy, x, true); },
      count, [&](int a) { ops::lt::wgrad_fp32(dy, x, main, true, a); });
#endif
}

void BM_SustainedGeluAux(benchmark::State& state) {
  if (perf::skip_without_cuda(state)) return;
#ifdef MEGATON_HAVE_CUDA
  perf::GeluAuxInputs g(state.range(0), state.range(1));
  torch::Tensor &x = g.x, &w = g.w, &b = g.b, &act = g.act, &pre = g.pre;
  int count = 0;
  if (!ops::lt::linear_gelu_aux(x, w, b, act, pre, 0, &count)) return state.SkipWithError("no cuBLASLt algorithm");
  rank_algos(
      state, g.flops(), [&] { ops::lt::linear_gelu_aux(x, w, b, act, pre, 0); }, count,
      [&](int a) { ops::lt::linear_gelu_aux(x, w, b, act, pre, a); });
#endif
}

void BM_SustainedDgelu(benchmark::State& state) {
  if (perf::skip_without_cuda(state)) return;
#ifdef MEGATON_HAVE_CUDA
  perf::DgeluInputs g(state.range(0), state.range(1));
  torch::Tensor &dy = g.dy, &w = g.w, &pre = g.pre, &d_pre = g.d_pre;
  int count = 0;
  if (!ops::lt::linear_dgelu(dy, w, pre, d_pre, 0, &count)) return state.SkipWithError("no cuBLASLt algorithm");
  rank_algos(
      state, g.flops(), [&] { ops::lt::linear_dgelu(dy, w, pre, d_pre, 0); }, count,
      [&](int a) { ops::lt::linear_dgelu(dy, w, pre, d_pre, a); });
#endif
}

}  // namespace

// GPT 1.3B (micro-batch 8 x seq 2048 = 16384 tokens, h 2048): the four weight gradients of a layer (QKV, attention
// output, fc1, fc2) and the MLP's two epilogue GEMMs.
BENCHMARK(BM_SustainedWgrad)
    ->Args({2048, 6144, 16384})
    ->Args({2048, 2048, 16384})
    ->Args({2048, 8192, 16384})
    ->Args({8192, 2048, 16384})
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SustainedGeluAux)->Args({16384, 2048})->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SustainedDgelu)->Args({16384, 2048})->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
