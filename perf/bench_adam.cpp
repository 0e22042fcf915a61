// One Adam step of a bf16 model's flat buffers at GPT-2 124M and GPT 1.3B sizes: the fused CUDA kernel
// (kernels/adam_kernels.cu: clip coefficient, moments, weight decay, update and the bf16 parameter write in one pass)
// and the ATen sequence it replaces in MixedPrecisionOptimizer (g *= clip, optim::adam_step_aten, parameters <-
// masters), timed alternately in the same iterations. Counters: aten_ms, fused_ms, speedup = aten / fused, and the
// memory traffic each moves (fused: 30 bytes per parameter, read g m v p, write m v p and the bf16 parameter; ATen:
// ~106) as fused_GBps / aten_GBps; the benchmark's own time and bytes/s are the fused kernel's.
// BM_AdamTuning/{n, packs}: the fused kernel with `packs` 16-byte packs per thread per pass (kernels::AdamTuning)
// against the default (1), timed alternately; counters as above with aten_* the default's.
//   build/perf/bench_adam [--benchmark_min_time=1]     (reports an error row without a CUDA device)
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "bench_alternate.h"
#include "optim/adam_step.h"

using namespace megaton;

namespace {

constexpr double kFusedBytes = 30;  // per parameter: read 4 x fp32, write 3 x fp32 + 1 x bf16
// ATen: clip mul 8; m: mul 8 + add 12; v: mul 8 + addcmul 16; decay 8; sqrt 8; div 8; add 8; addcdiv 16; copy 6.
constexpr double kAtenBytes = 8 + 20 + 24 + 8 + 8 + 8 + 8 + 16 + 6;

// The buffers of one Adam step over n parameters (fp32 masters, moments and gradient, bf16 parameters) and its scalars.
struct AdamBuffers {
  torch::Tensor master, m, v, grad0, grad, param, chunks;
  std::vector<optim::Run> runs;
  optim::AdamScalars s;

  explicit AdamBuffers(int64_t n) {
    auto f32 = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat32);
    master = torch::randn({n}, f32), m = torch::zeros({n}, f32), v = torch::zeros({n}, f32);  // [n]
    grad0 = torch::randn({n}, f32), grad = grad0.clone();                                     // [n]
    param = master.to(torch::kBFloat16);                                                      // [n]
    // Weight decay on ~2/3 of the elements in runs of 1M, as weights and biases/LayerNorms alternate in a model.
    for (int64_t at = 0; at + (1 << 20) <= n; at += 3 << 19) runs.push_back({at, 1 << 20});
    chunks = optim::adam_chunk_table(runs, n).to(torch::kCUDA);  // [C, 3]
    kernels::AdamHyper& h = s.hyper;
    h.lr = 1e-4, h.beta1 = 0.9, h.beta2 = 0.95, h.weight_decay = 0.1;
    h.bias_correction1 = 0.1, h.bias_correction2 = 0.05, h.grad_scale = 0.5;
  }
  void fused(int packs_per_pass = 1) { optim::adam_step_fused(master, m, v, grad, chunks, s, param, packs_per_pass); }
};

void BM_AdamFusedVsAten(benchmark::State& state) {
  if (!torch::cuda::is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const int64_t n = state.range(0);
  AdamBuffers b(n);
  perf::time_alternately(
      state, [&] { b.grad.copy_(b.grad0); },  // the ATen path uses the gradient as scratch
      [&] { b.fused(); },
      [&] {
        optim::adam_step_aten(b.master, b.m, b.v, b.grad, b.runs, b.s);  // applies grad_scale as the clip's g.mul_ does
        b.param.copy_(b.master);
      },
      kFusedBytes * static_cast<double>(n), kAtenBytes * static_cast<double>(n));
}

void BM_AdamTuning(benchmark::State& state) {
  if (!torch::cuda::is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const int64_t n = state.range(0);
  const int packs = static_cast<int>(state.range(1));
  AdamBuffers b(n);
  const double bytes = kFusedBytes * static_cast<double>(n);
  perf::time_alternately(
      state, [] {}, [&] { b.fused(packs); }, [&] { b.fused(1); }, bytes, bytes);
}

}  // namespace

// Parameters of GPT-2 124M (12 x 768, sequence 1024) and GPT 1.3B (24 x 2048, sequence 2048), vocabulary padded to
// 50304: 12 l h^2 + 13 l h + (V + s) h + 2 h.
BENCHMARK(BM_AdamFusedVsAten)->Arg(124475904)->Arg(1315819520)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AdamTuning)
    ->Args({1315819520, 2})
    ->Args({1315819520, 4})
    ->Args({124475904, 2})
    ->Args({124475904, 4})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
