// Folding bf16 gradients into fp32 main grads (what DataParallel's hooks do once per parameter and micro-batch) at
// GPT-2 124M and GPT 1.3B sizes: parallel::accumulate_main_grad's CUDA kernel (kernels/grad_accum_kernels.cu) and
// ATen's mixed-dtype `main.add_(grad)`, timed alternately in the same iterations. Counters: aten_ms, fused_ms,
// speedup, and GB/s for both at 10 bytes per element (read 2 + 4, write 4); the benchmark's own time is the kernel's.
// BM_EmbeddingGradVsAten: the token embedding's weight gradient into its fp32 main grad at the 124M and 1.3B training
// sizes (tokens x h, GPT-2's 50304 padded rows, bf16): ops::accumulate_embedding_grad (a stable sort of the ids, then
// one kernel adding each id's summed rows to the main grad) against ATen's embedding_dense_backward into a bf16 [V, h]
// gradient and its add into the main grad (what ran before, through DataParallel's hook). Counters as above.
//   build/perf/bench_grad_accum [--benchmark_min_time=1]     (reports an error row without a CUDA device)
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "bench_alternate.h"
#include "ops/embedding.h"
#include "parallel/data/grad_accum.h"

using namespace megaton;

namespace {

constexpr double kBytes = 10;  // per element: read a bf16 gradient and an fp32 main grad, write the main grad

void BM_GradAccumKernelVsAten(benchmark::State& state) {
  if (!torch::cuda::is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const int64_t n = state.range(0);
  const auto f32 = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat32);
  torch::Tensor main = torch::zeros({n}, f32);                       // [n] fp32
  torch::Tensor grad = torch::randn({n}, f32).to(torch::kBFloat16);  // [n] bf16
  perf::time_alternately(
      state, [] {}, [&] { parallel::accumulate_main_grad(main, grad); }, [&] { main.add_(grad); },
      kBytes * static_cast<double>(n), kBytes * static_cast<double>(n));
}

void BM_EmbeddingGradVsAten(benchmark::State& state) {
  if (!torch::cuda::is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const int64_t tokens = state.range(0), h = state.range(1), vocab = 50304;
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  torch::Tensor ids = torch::randint(0, 50257, {tokens}, cuda.dtype(torch::kInt64));
  ids.masked_fill_(torch::rand({tokens}, cuda) < 0.04, 13);                      // a frequent token, as in text
  torch::Tensor grad = torch::randn({tokens, h}, cuda.dtype(torch::kBFloat16));  // [tokens, h]
  torch::Tensor main = torch::zeros({vocab, h}, cuda.dtype(torch::kFloat32));
  perf::time_alternately(
      state, [] {}, [&] { ops::accumulate_embedding_grad(main, ids, grad); },
      [&] { parallel::accumulate_main_grad(main, torch::embedding_dense_backward(grad, ids, vocab, -1, false)); }, 0,
      0);
}

}  // namespace

BENCHMARK(BM_EmbeddingGradVsAten)
    ->Args({32768, 768})
    ->Args({16384, 2048})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
// Parameters of GPT-2 124M and GPT 1.3B (as perf/bench_adam.cpp).
BENCHMARK(BM_GradAccumKernelVsAten)->Arg(124475904)->Arg(1315819520)->UseManualTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
