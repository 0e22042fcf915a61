// LayerNorm forward + backward at GPT-2 124M ([32768 rows = micro-batch 32 x seq 1024, h = 768]) and GPT 1.3B
// ([16384 = 8 x 2048, 2048]) training sizes, bf16: the fused CUDA kernels (kernels/layer_norm_kernels.cu) and ATen's
// native_layer_norm / native_layer_norm_backward they replace, timed alternately in the same iterations with CUDA
// events around kReps back-to-back calls (GPU time, without the host's launch gaps).
// BM_LayerNormFusedVsAten: the ops without autograd. Counters: aten_us, fused_us (forward + backward, one call),
// aten_fwd_us, fused_fwd_us (forward alone), speedup = aten / fused, fused_GBps (the 5 * rows * h elements the
// fused pair must move: x read and y written forward, x and dy read and dx written backward).
// BM_LayerNormAutogradFusedVsAten: ops::layer_norm(use_fused) and backward() through autograd, as the model runs it.
// The benchmarks' own times are the fused ones.
//   build/perf/bench_layer_norm [--benchmark_min_time=1]     (reports an error row without a CUDA device/build)
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "ops/layer_norm.h"
#ifdef MEGATON_HAVE_CUDA
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "ops/layer_norm_cuda.h"
#endif

using namespace megaton;

namespace {

constexpr double kEps = 1e-5;
constexpr int kReps = 25;  // calls per timing (GPT-2 124M runs 25 LayerNorms per step)

#ifdef MEGATON_HAVE_CUDA
// GPU seconds per call of fn, run `reps` times back to back on the current stream between two CUDA events.
template <typename F>
double gpu_seconds(F&& fn, int reps) {
  const cudaStream_t s = c10::cuda::getCurrentCUDAStream().stream();
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start, s);
  for (int i = 0; i < reps; ++i) fn();
  cudaEventRecord(stop, s);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms * 1e-3 / reps;
}

struct Inputs {
  torch::Tensor x, w, b, dy;  // [rows, h], [h], [h], [rows, h] bf16
};

Inputs make_inputs(int64_t rows, int64_t h) {
  auto opts = torch::TensorOptions().device(torch::kCUDA);
  return {torch::randn({rows, h}, opts).to(torch::kBFloat16), (1 + 0.1 * torch::randn({h}, opts)).to(torch::kBFloat16),
          (0.1 * torch::randn({h}, opts)).to(torch::kBFloat16), torch::randn({rows, h}, opts).to(torch::kBFloat16)};
}
#endif

bool skip(benchmark::State& state) {
#ifndef MEGATON_HAVE_CUDA
  state.SkipWithError("not a CUDA build (-DMEGATON_CUDA=ON)");
  return true;
#else
  if (torch::cuda::is_available()) return false;
  state.SkipWithError("no CUDA device");
  return true;
#endif
}

void BM_LayerNormFusedVsAten(benchmark::State& state) {
  if (skip(state)) return;
#ifdef MEGATON_HAVE_CUDA
  const int64_t rows = state.range(0), h = state.range(1);
  const Inputs in = make_inputs(rows, h);
  auto aten_fwd = [&] { return at::native_layer_norm(in.x, {h}, in.w, in.b, kEps); };
  auto aten = [&] {
    auto [y, mean, rstd] = aten_fwd();
    at::native_layer_norm_backward(in.dy, in.x, {h}, mean, rstd, in.w, in.b, {true, true, true});
  };
  auto fused_fwd = [&] { return ops::fused_layer_norm_forward(in.x, in.w, in.b, kEps); };
  auto fused = [&] {
    const ops::FusedLayerNormOutput f = fused_fwd();
    ops::fused_layer_norm_backward(in.dy, in.x, in.w, f.mean, f.rstd);
  };
  gpu_seconds(aten, 2), gpu_seconds(fused, 2);  // warm-up (allocator, kernels)
  double a = 0, f = 0, af = 0, ff = 0;
  int64_t n = 0;
  for (auto _ : state) {
    a += gpu_seconds(aten, kReps);
    const double t = gpu_seconds(fused, kReps);
    f += t;
    af += gpu_seconds(aten_fwd, kReps);
    ff += gpu_seconds(fused_fwd, kReps);
    ++n;
    state.SetIterationTime(t);
  }
  const double bytes = 5.0 * static_cast<double>(rows * h) * 2;  // bf16
  state.SetBytesProcessed(static_cast<int64_t>(bytes) * n);
  state.counters["aten_us"] = a / double(n) * 1e6;
  state.counters["fused_us"] = f / double(n) * 1e6;
  state.counters["aten_fwd_us"] = af / double(n) * 1e6;
  state.counters["fused_fwd_us"] = ff / double(n) * 1e6;
  state.counters["speedup"] = a / f;
  state.counters["fused_GBps"] = bytes * double(n) / f / 1e9;
#endif
}

void BM_LayerNormAutogradFusedVsAten(benchmark::State& state) {
  if (skip(state)) return;
#ifdef MEGATON_HAVE_CUDA
  const int64_t rows = state.range(0), h = state.range(1);
  const Inputs in = make_inputs(rows, h);
  torch::Tensor x = in.x.clone().requires_grad_(true), w = in.w.clone().requires_grad_(true),
                b = in.b.clone().requires_grad_(true);
  auto step = [&](bool fused) {
    return [&, fused] {
      x.mutable_grad() = torch::Tensor(), w.mutable_grad() = torch::Tensor(), b.mutable_grad() = torch::Tensor();
      ops::layer_norm(x, w, b, kEps, fused).backward(in.dy);
    };
  };
  gpu_seconds(step(false), 2), gpu_seconds(step(true), 2);  // warm-up
  double a = 0, f = 0;
  int64_t n = 0;
  for (auto _ : state) {
    a += gpu_seconds(step(false), kReps);
    const double t = gpu_seconds(step(true), kReps);
    f += t;
    ++n;
    state.SetIterationTime(t);
  }
  state.counters["aten_us"] = a / double(n) * 1e6;
  state.counters["fused_us"] = f / double(n) * 1e6;
  state.counters["speedup"] = a / f;
#endif
}

}  // namespace

BENCHMARK(BM_LayerNormFusedVsAten)
    ->Args({32768, 768})
    ->Args({16384, 2048})
    ->UseManualTime()
    ->Iterations(200)  // each iteration times 25 calls of each side: a fixed count keeps the run to seconds
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LayerNormAutogradFusedVsAten)
    ->Args({32768, 768})
    ->Args({16384, 2048})
    ->UseManualTime()
    ->Iterations(200)  // each iteration times 25 calls of each side: a fixed count keeps the run to seconds
    ->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
