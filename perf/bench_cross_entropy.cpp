// Forward + backward of the vocabulary cross-entropy at GPT-2 124M training sizes (micro-batch 32 x seq 1024 tokens
// over the padded vocabulary 50304, bf16 logits): the fused CUDA kernels (kernels/cross_entropy_kernels.cu) and the
// unfused ATen path they replace, timed alternately in the same iterations. Counters: aten_ms, fused_ms and
// speedup = aten / fused; the benchmark's own time is the fused one.
// BM_LmHeadLossVsSeparate: the LM head's GEMM and the loss, forward + backward, as training runs them at the 124M and
// 1.3B sizes: parallel::lm_head_cross_entropy (the logits' gradient written in the forward pass, one pass over the
// logits less) against parallel_lm_logits + vocab_parallel_cross_entropy (the fused kernels), "aten" in the counters.
// BM_CrossEntropyLossGradVariants: kernels::cross_entropy_loss_grad's variants (range 1; 4 = the two-kernel path:
// row statistics, then the gradient in place) on bf16 logits [rows, 50304], GPU time per call (CUDA events) and the
// bytes a one-pass kernel moves (the logits read and written once) per second; range 1 = 5: the row statistics alone
// (cross_entropy_row_stats, the loss's forward), its bytes the logits read once. H200 (the
// flushing exp2): shared row 1.93 ms at 32768 rows (3.42 TB/s), two kernels 2.56, row statistics 0.94
// (3.52 TB/s; 1.39 with __expf).
// BM_ScaleRowsVsAten: the LM head backward's row scaling (bf16 [tokens, h] times an fp32 per-row loss gradient),
// parallel::scale_rows_cuda against ATen's mixed-dtype mul_out, 20 calls per timed span, at the 124M and 1.3B sizes.
//   build/perf/bench_cross_entropy [--benchmark_min_time=1]     (reports an error row without a CUDA device)
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <string>

#include "bench_alternate.h"
#include "bench_gpu_seconds.h"
#ifdef MEGATON_HAVE_CUDA
#include <c10/cuda/CUDAStream.h>

#include "cross_entropy_kernels.h"
#endif
#include "dist/self_communicator.h"
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
  auto tp = dist::single_rank_groups().tp;
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
  auto tp = dist::single_rank_groups().tp;
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

void BM_CrossEntropyLossGradVariants(benchmark::State& state) {
  if (perf::skip_without_cuda(state)) return;
#ifdef MEGATON_HAVE_CUDA
  const int64_t rows = state.range(0), vocab = 50304, valid = 50257;
  const int variant = static_cast<int>(state.range(1));
  auto opts = torch::TensorOptions().device(torch::kCUDA);
  torch::Tensor logits = (torch::randn({rows, vocab}, opts) * 3).to(torch::kBFloat16);
  torch::Tensor target = torch::randint(0, valid, {rows}, opts.dtype(torch::kInt64));
  torch::Tensor loss = torch::empty({rows}, opts);
  auto f32 = opts.dtype(torch::kFloat32);
  torch::Tensor mx = torch::empty({rows}, f32), sum = torch::empty({rows}, f32), tl = torch::empty({rows}, f32);
  const cudaStream_t s = c10::cuda::getCurrentCUDAStream().stream();
  const auto bf16 = kernels::FloatType::kBFloat16;
  bool ok = true;
  auto call = [&] {
    if (variant == 5) {
      kernels::cross_entropy_row_stats(logits.data_ptr(), bf16, rows, vocab, valid, target.data_ptr<int64_t>(), 0,
                                       mx.data_ptr<float>(), sum.data_ptr<float>(), tl.data_ptr<float>(), s);
    } else if (variant < 4) {
      ok &= kernels::cross_entropy_loss_grad(logits.data_ptr(), bf16, rows, vocab, valid, target.data_ptr<int64_t>(),
                                             loss.data_ptr<float>(), s, static_cast<kernels::LossGradVariant>(variant));
    } else {  // the two-kernel path (the statistics stand in for their inverse: same traffic)
      kernels::cross_entropy_row_stats(logits.data_ptr(), bf16, rows, vocab, valid, target.data_ptr<int64_t>(), 0,
                                       mx.data_ptr<float>(), sum.data_ptr<float>(), tl.data_ptr<float>(), s);
      kernels::cross_entropy_backward(logits.data_ptr(), logits.data_ptr(), bf16, rows, vocab, valid,
                                      target.data_ptr<int64_t>(), 0, mx.data_ptr<float>(), sum.data_ptr<float>(),
                                      nullptr, s);
    }
  };
  perf::gpu_seconds(call, 1);  // warm-up
  if (!ok) {
    state.SkipWithError("variant not taken on this device");
    return;
  }
  double t = 0;
  int64_t n = 0;
  for (auto _ : state) {
    const double sec = perf::gpu_seconds(call, 5);
    t += sec, ++n;
    state.SetIterationTime(sec);
  }
  const double bytes = (variant == 5 ? 1.0 : 2.0) * double(rows * vocab) * 2.0;  // read (+ write), bf16
  state.counters["us"] = t / double(n) * 1e6;
  state.counters["GBps"] = bytes * double(n) / t / 1e9;
  const char* names[] = {"shared row", "cluster of 4", "cluster of 8", "L2 re-read", "two kernels", "row statistics"};
  state.SetLabel(names[variant]);
#endif
}

void BM_ScaleRowsVsAten(benchmark::State& state) {
  if (!torch::cuda::is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
#ifdef MEGATON_HAVE_CUDA
  const int64_t tokens = state.range(0), h = state.range(1);
  constexpr int kCalls = 20;
  auto opts = torch::TensorOptions().device(torch::kCUDA);
  const torch::Tensor x = torch::randn({tokens, h}, opts).to(torch::kBFloat16);  // [t, h]
  const torch::Tensor g = torch::rand({tokens, 1}, opts);                        // [t, 1] fp32
  torch::Tensor out = torch::empty_like(x);
  const double bytes = double(kCalls) * double(tokens * h) * 2.0 * 2.0;  // bf16 read + write
  perf::time_alternately(
      state, [] {},
      [&] {
        for (int i = 0; i < kCalls; ++i) parallel::scale_rows_cuda(x, g, out);
      },
      [&] {
        for (int i = 0; i < kCalls; ++i) torch::mul_out(out, x, g);
      },
      bytes, bytes);
#endif
}

}  // namespace

BENCHMARK(BM_ScaleRowsVsAten)->Args({32768, 768})->Args({16384, 2048})->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CrossEntropyLossGradVariants)
    ->ArgsProduct({{32768, 16384}, {0, 1, 2, 3, 4, 5}})
    ->UseManualTime()
    ->Iterations(20)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LmHeadLossVsSeparate)
    ->Args({32768, 768})
    ->Args({16384, 2048})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CrossEntropyFusedVsAten)->Arg(32768)->Arg(4096)->UseManualTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
