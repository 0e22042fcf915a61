// Forward + backward of the vocabulary cross-entropy at GPT-2 124M training sizes (micro-batch 32 x seq 1024 tokens
// over the padded vocabulary 50304, bf16 logits): the fused CUDA kernels (kernels/cross_entropy_kernels.cu) and the
// unfused ATen path they replace, timed alternately in the same iterations. Counters: aten_ms, fused_ms and
// speedup = aten / fused; the benchmark's own time is the fused one.
// BM_LmHeadLossVsSeparate: the LM head's GEMM and the loss, forward + backward, as training runs them at the 124M and
// 1.3B sizes: parallel::lm_head_cross_entropy (the logits' gradient written in the forward pass, one pass over the
// logits less) against parallel_lm_logits + vocab_parallel_cross_entropy (the fused kernels), "aten" in the counters.
//   build/perf/bench_cross_entropy [--benchmark_min_time=1]     (reports an error row without a CUDA device)
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "bench_alternate.h"
#include "parallel/self_communicator.h"
#include "parallel/tensor/cross_entropy.h"
#include "parallel/tensor/layers.h"
#include "parallel/tensor/lm_head_loss.h"

using namespace megaton;

namespace {

void BM_CrossEntropyFusedVsAten(benchmark::State& state) {
  if (!torch::cuda::is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const int64_t tokens = state.range(0), vocab = 50304;
  auto opts = torch::TensorOptions().device(torch::kCUDA);
  torch::Tensor logits = torch::randn({tokens, 1, vocab}, opts).to(torch::kBFloat16).requires_grad_(true);  // [t,1,V]
  torch::Tensor target = torch::randint(0, vocab, {tokens, 1}, opts.dtype(torch::kInt64));                  // [t, 1]
  auto tp = parallel::single_rank_groups().tp;
  auto run = [&](bool fused) {
    parallel::vocab_parallel_cross_entropy(logits, target, tp, /*valid_columns=*/-1, fused).mean().backward();
  };
  perf::time_alternately(
      state, [&] { logits.mutable_grad() = torch::Tensor(); }, [&] { run(true); }, [&] { run(false); }, 0, 0);
}

void BM_LmHeadLossVsSeparate(benchmark::State& state) {
  if (!torch::cuda::is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const int64_t tokens = state.range(0), h = state.range(1), vocab = 50304;
  auto opts = torch::TensorOptions().device(torch::kCUDA);
  torch::Tensor hidden = torch::randn({tokens, 1, h}, opts).to(torch::kBFloat16).requires_grad_(true);  // [t, 1, h]
  torch::Tensor weight = (torch::randn({vocab, h}, opts) * 0.02).to(torch::kBFloat16).requires_grad_(true);
  torch::Tensor target = torch::randint(0, 50257, {tokens, 1}, opts.dtype(torch::kInt64));  // [t, 1]
  auto tp = parallel::single_rank_groups().tp;
  auto fused = [&] { parallel::lm_head_cross_entropy(hidden, weight, target, tp, 50257).mean().backward(); };
  auto separate = [&] {
    parallel::vocab_parallel_cross_entropy(parallel::parallel_lm_logits(hidden, weight, tp), target, tp, 50257)
        .mean()
        .backward();
  };
  perf::time_alternately(
      state,
      [&] {
        hidden.mutable_grad() = torch::Tensor();
        weight.mutable_grad() = torch::Tensor();
      },
      fused, separate, 0, 0);
}

}  // namespace

BENCHMARK(BM_LmHeadLossVsSeparate)
    ->Args({32768, 768})
    ->Args({16384, 2048})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CrossEntropyFusedVsAten)->Arg(32768)->Arg(4096)->UseManualTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
