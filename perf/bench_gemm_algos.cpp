// The cuBLASLt GEMMs training runs (ops/cublaslt_gemm.h) with each algorithm cuBLASLt's heuristic offers, against the
// one it ranks first and the one ops::gemm_tuner() keeps (what training runs with --gemm-autotune), GPU time over
// back-to-back calls (CUDA events), bf16:
//   BM_WgradAlgos/{in, out, tokens}   a weight gradient into its fp32 main grad (gradient accumulation fusion's first
//                                     write, beta 0; ops::lt::wgrad_fp32) against cublasGemmEx's own choice (split-K
//                                     kernels at GPT-2 124M, ~700 model-TFLOP/s against ~740 for the other GEMMs),
//                                     what ops::accumulate_weight_grad_cuda runs without --gemm-autotune
//   BM_GeluAuxAlgos/{tokens, h}       fc1 with bias + GELU in the epilogue (ops::lt::linear_gelu_aux, f = 4h)
//   BM_DgeluAlgos/{tokens, h}         fc2's input gradient times the GELU derivative (ops::lt::linear_dgelu)
//   BM_MlpGemmOrientations/{tokens, h} both in other orientations and without their epilogues (ops::lt::mlp_probe):
//                                     the fastest algorithm of each, <probe>_ms and <probe>_tflops
// Counters: tuned_ms (what training runs with --gemm-autotune: the algorithm ops::gemm_tuner() keeps once its trial
// is over; the benchmark's own time), default_ms (wgrad only: cublasGemmEx, the tuner's baseline), lt0_ms (the
// heuristic's first), best_ms and best_algo (the fastest offered, timed here), algos (how many), speedup (default_ms
// or lt0_ms over tuned_ms), tflops (of the best).
//   build/perf/bench_gemm_algos     (an error row without CUDA)
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <functional>
#include <limits>
#include <string>
#include <utility>

#include "bench_gemm_inputs.h"
#include "bench_gpu_seconds.h"
#include "ops/cublaslt_gemm.h"
#include "ops/gemm_tuner.h"
#include "ops/linear.h"

using namespace megaton;

namespace {

#ifdef MEGATON_HAVE_CUDA
constexpr int kReps = 20;

// Times run(a) for every algorithm a < count; sets lt0_ms, best_ms, best_algo, algos, tflops (flops per call) and
// returns the heuristic's first algorithm's seconds.
template <typename Run>
double time_algos(benchmark::State& state, int count, double flops, Run&& run) {
  double first = 0, best = std::numeric_limits<double>::infinity();
  int best_algo = -1;
  for (int a = 0; a < count; ++a) {
    run(a);  // warm-up (kernel loading)
    const double s = perf::gpu_seconds([&] { run(a); }, kReps);
    if (a == 0) first = s;
    if (s < best) best = s, best_algo = a;
  }
  state.counters["lt0_ms"] = first * 1e3;
  state.counters["best_ms"] = best * 1e3;
  state.counters["best_algo"] = best_algo;
  state.counters["algos"] = count;
  state.counters["tflops"] = flops / best * 1e-12;
  return first;
}

// Seconds per call of fn (a tuned GEMM) with the algorithm the tuner keeps: with the tuner on (as --gemm-autotune),
// fn is called until the trials are over (the candidates take the calls in turn until each has its samples:
// ops/gemm_tuner.h), then timed; the tuner is left as it was.
double tuned_seconds(const std::function<void()>& fn) {
  ops::GemmTuner& tuner = ops::gemm_tuner();
  const bool was = tuner.enabled();
  tuner.set_enabled(true);
  int calls = 0;
  do fn();
  while (++calls < 1000 && tuner.trials_in_progress() > 0);
  const double s = perf::gpu_seconds(fn, kReps);
  tuner.set_enabled(was);
  return s;
}

#endif

void BM_WgradAlgos(benchmark::State& state) {
  if (perf::skip_without_cuda(state)) return;
#ifdef MEGATON_HAVE_CUDA
  const int64_t in = state.range(0), out = state.range(1), tokens = state.range(2);
  perf::WgradInputs g(in, out, tokens);
  torch::Tensor &dy = g.dy, &x = g.x, &main = g.main;
  int count = 0;
  if (!ops::lt::wgrad_fp32(dy, x, main, true, 0, &count)) return state.SkipWithError("no cuBLASLt algorithm");
  auto training = [&] { ops::accumulate_weight_grad_cuda(main, dy, x, true); };
  for (auto _ : state) {
    ops::GemmTuner& tuner = ops::gemm_tuner();
    const bool was = tuner.enabled();
    tuner.set_enabled(false);  // the baseline: cublasGemmEx
    const double fallback = perf::gpu_seconds(training, kReps);
    tuner.set_enabled(was);
    const double tuned = tuned_seconds(training);
    time_algos(state, count, 2.0 * double(in * out) * double(tokens),
               [&](int a) { ops::lt::wgrad_fp32(dy, x, main, true, a); });
    state.SetIterationTime(tuned);
    state.counters["default_ms"] = fallback * 1e3;
    state.counters["tuned_ms"] = tuned * 1e3;
    state.counters["speedup"] = fallback / tuned;
  }
#endif
}

#ifdef MEGATON_HAVE_CUDA
// An MLP epilogue GEMM: run(algo, count) calls it (ops::lt::kTunedAlgo: the tuner's choice; count: where given, set to
// how many algorithms are on offer). Every algorithm against the heuristic's first and the tuner's choice.
void epilogue_algos(benchmark::State& state, double flops, const std::function<bool(int, int*)>& run) {
  int count = 0;
  if (!run(0, &count)) return state.SkipWithError("no cuBLASLt algorithm");
  for (auto _ : state) {
    const double first = time_algos(state, count, flops, [&](int a) { run(a, nullptr); });
    const double tuned = tuned_seconds([&] { run(ops::lt::kTunedAlgo, nullptr); });
    state.SetIterationTime(tuned);
    state.counters["tuned_ms"] = tuned * 1e3;
    state.counters["speedup"] = first / tuned;
  }
}
#endif

void BM_GeluAuxAlgos(benchmark::State& state) {
  if (perf::skip_without_cuda(state)) return;
#ifdef MEGATON_HAVE_CUDA
  perf::GeluAuxInputs g(state.range(0), state.range(1));
  torch::Tensor &x = g.x, &w = g.w, &b = g.b, &act = g.act, &pre = g.pre;
  epilogue_algos(state, g.flops(),
                 [&](int a, int* count) { return ops::lt::linear_gelu_aux(x, w, b, act, pre, a, count); });
#endif
}

void BM_DgeluAlgos(benchmark::State& state) {
  if (perf::skip_without_cuda(state)) return;
#ifdef MEGATON_HAVE_CUDA
  perf::DgeluInputs g(state.range(0), state.range(1));
  torch::Tensor &dy = g.dy, &w = g.w, &pre = g.pre, &d_pre = g.d_pre;
  epilogue_algos(state, g.flops(),
                 [&](int a, int* count) { return ops::lt::linear_dgelu(dy, w, pre, d_pre, a, count); });
#endif
}

// Which kernels cuBLASLt has for the MLP's epilogue GEMMs (fc1 + GELU_AUX_BIAS at ~640 model-TFLOP/s and fc2's DGELU
// at ~605 in the 1.3B step, against ~750 for its plain GEMMs: docs/gpu.md): each ops::lt::MlpProbe orientation's
// fastest offered algorithm, ms per call (counters <probe>_ms, <probe>_tflops).
void BM_MlpGemmOrientations(benchmark::State& state) {
  if (perf::skip_without_cuda(state)) return;
#ifdef MEGATON_HAVE_CUDA
  const int64_t tokens = state.range(0), h = state.range(1), f = 4 * h;
  const auto o = perf::bf16_cuda();
  torch::Tensor x = torch::randn({tokens, h}, o), w1 = torch::randn({f, h}, o) * 0.02, b = torch::randn({f}, o) * 0.02;
  torch::Tensor w2 = torch::randn({h, f}, o) * 0.02, w2t = w2.t().contiguous();
  torch::Tensor out = torch::empty({tokens, f}, o), aux = torch::randn({tokens, f}, o);
  using P = ops::lt::MlpProbe;
  const std::pair<P, const char*> probes[] = {{P::kFc1GeluAux, "fc1_gelu_aux"},    {P::kFc1Plain, "fc1_plain"},
                                              {P::kFc1GeluAuxT, "fc1_gelu_aux_t"}, {P::kDgelu, "dgelu"},
                                              {P::kDgeluPlain, "dgelu_plain"},     {P::kDgeluT, "dgelu_t"},
                                              {P::kDgeluTW, "dgelu_tw"},           {P::kDgeluPlainT, "dgelu_plain_t"}};
  const double flops = 2.0 * double(tokens) * double(h) * double(f);
  for (auto _ : state) {
    double dgelu = 0;  // the iteration's time: the DGELU GEMM as training runs it
    for (const auto& [probe, name] : probes) {
      const bool fc1 = probe == P::kFc1GeluAux || probe == P::kFc1Plain || probe == P::kFc1GeluAuxT;
      const torch::Tensor& w = fc1 ? w1 : (probe == P::kDgeluTW || probe == P::kDgeluPlainT ? w2t : w2);
      int count = 0;
      double best = std::numeric_limits<double>::infinity();
      // x is the fc1 input and, having dy's shape [T, h], stands for dy too
      if (ops::lt::mlp_probe(probe, x, w, b, out, aux, 0, &count)) {
        for (int i = 0; i < count; ++i) {
          auto call = [&] { ops::lt::mlp_probe(probe, x, w, b, out, aux, i); };
          call();  // warm-up (kernel loading)
          best = std::min(best, perf::gpu_seconds(call, kReps));
        }
      }
      if (probe == P::kDgelu) dgelu = best;
      state.counters[std::string(name) + "_ms"] = best * 1e3;
      state.counters[std::string(name) + "_tflops"] = count > 0 ? flops / best * 1e-12 : 0.0;
      state.counters[std::string(name) + "_algos"] = count;
    }
    state.SetIterationTime(dgelu);
  }
#endif
}

}  // namespace

// {in, out, tokens}: the four weights of a layer (QKV, attention output, fc1, fc2) at GPT-2 124M (micro-batch 32 x
// seq 1024) and GPT 1.3B (8 x 2048).
BENCHMARK(BM_WgradAlgos)
    ->Args({768, 2304, 32768})
    ->Args({768, 768, 32768})
    ->Args({768, 3072, 32768})
    ->Args({3072, 768, 32768})
    ->Args({2048, 6144, 16384})
    ->Args({2048, 2048, 16384})
    ->Args({2048, 8192, 16384})
    ->Args({8192, 2048, 16384})
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GeluAuxAlgos)
    ->Args({32768, 768})
    ->Args({16384, 2048})
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DgeluAlgos)
    ->Args({32768, 768})
    ->Args({16384, 2048})
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_MlpGemmOrientations)
    ->Args({32768, 768})
    ->Args({16384, 2048})
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
