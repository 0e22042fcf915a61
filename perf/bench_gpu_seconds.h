// GPU time of back-to-back calls between two CUDA events on the current stream: the kernel benchmarks' timer where
// one call is too short for the host's synchronise-and-clock timing (bench_alternate.h). CUDA builds only.
#pragma once
#ifdef MEGATON_HAVE_CUDA
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

namespace megaton::perf {

/// Seconds per call of fn, run `reps` times back to back on the current stream between two CUDA events.
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

}  // namespace megaton::perf
#endif
