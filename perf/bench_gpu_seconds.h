// The kernel benchmarks' GPU helpers: skip_without_cuda, and (CUDA builds) gpu_seconds, the GPU time of back-to-back
// calls between two CUDA events on the current stream, where one call is too short for the host's
// synchronise-and-clock timing (bench_alternate.h).
#pragma once
#include <benchmark/benchmark.h>
#include <torch/torch.h>

namespace megaton::perf {

/// Marks the benchmark skipped and returns true without a CUDA build or a CUDA device.
inline bool skip_without_cuda(benchmark::State& state) {
#ifndef MEGATON_HAVE_CUDA
  state.SkipWithError("not a CUDA build (-DMEGATON_CUDA=ON)");
  return true;
#else
  if (torch::cuda::is_available()) return false;
  state.SkipWithError("no CUDA device");
  return true;
#endif
}

}  // namespace megaton::perf

#ifdef MEGATON_HAVE_CUDA
#include <c10/cuda/CUDAFunctions.h>

#include "core/device_clock.h"

namespace megaton::perf {

/// Seconds per call of fn, run `reps` times back to back on the current stream between two CUDA events (the training
/// timers' device clock, core/device_clock.h).
template <typename F>
double gpu_seconds(F&& fn, int reps) {
  const DeviceClock clock = cuda_device_clock(c10::cuda::current_device());
  const std::unique_ptr<DeviceMark> start = clock();
  for (int i = 0; i < reps; ++i) fn();
  return clock()->seconds_since(*start) / reps;
}

}  // namespace megaton::perf
#endif
