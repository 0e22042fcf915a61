// The timing loop of the kernel benchmarks: megaton's fused CUDA path and the ATen path it replaces, run alternately
// in the same Google Benchmark iterations (each call bracketed by device synchronisation, `prepare` outside the timed
// span), the benchmark's manual time being the fused path's. Sets the counters fused_ms, aten_ms, speedup (aten /
// fused) and, for bytes > 0, fused_GBps / aten_GBps and the bytes processed.
#pragma once
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdint>

namespace megaton::perf {

template <typename Prepare, typename Fused, typename Aten>
void time_alternately(benchmark::State& state, Prepare prepare, Fused fused, Aten aten, double fused_bytes,
                      double aten_bytes) {
  auto timed = [&](auto&& run) {
    prepare();
    torch::cuda::synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    run();
    torch::cuda::synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  timed(aten), timed(fused);  // warm-up (allocator, kernel loading, cuBLAS handles)
  double aten_s = 0, fused_s = 0;
  int64_t iters = 0;
  for (auto _ : state) {
    aten_s += timed(aten);
    const double f = timed(fused);
    fused_s += f;
    ++iters;
    state.SetIterationTime(f);
  }
  const double n = static_cast<double>(iters);
  state.counters["aten_ms"] = aten_s / n * 1e3;
  state.counters["fused_ms"] = fused_s / n * 1e3;
  state.counters["speedup"] = aten_s / fused_s;
  if (fused_bytes > 0) {
    state.SetBytesProcessed(static_cast<int64_t>(fused_bytes) * iters);
    state.counters["fused_GBps"] = fused_bytes * n / fused_s / 1e9;
    state.counters["aten_GBps"] = aten_bytes * n / aten_s / 1e9;
  }
}

}  // namespace megaton::perf
