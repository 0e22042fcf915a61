// Causal attention forward + backward at the training shapes, bf16, through each of ATen's fused SDPA backends: the
// one ATen picks for training (cuDNN on an H200 with torch 2.11, as for the PyTorch peer) against the flash
// (FlashAttention-2) and memory-efficient kernels. q, k, v are views of one [s, b, np, 3, d] QKV output as
// ops::causal_attention takes them, so the backward's time includes stacking dq, dk, dv into the QKV gradient.
//   BM_SdpaBackend/{b, s, np, d, backend: 0 cuDNN, 1 flash, 2 memory-efficient, dropout: per mille}
// (with Megatron's default attention dropout, 100 = 0.1, the cuDNN kernels took 12.4 ms more a 1.3B step than
// without in an H200 profile: the rows with dropout say whether another backend draws it
// cheaper)
// Counters: fwd_ms, step_ms (forward + backward), tflops (the kernels' FLOPs, the causal half: 2 s^2 d per head and
// batch forward, 2.5x that backward, over step_ms). GPT-2 124M: {32, 1024, 12, 64}; GPT 1.3B: {8, 2048, 16, 128}.
//
// BM_DocumentMask/{b, s, np, d, doc: tokens per document, backend: -1 ATen's choice, 0 cuDNN, 2 memory-efficient,
// 9 variable-length flash}: ops::causal_attention (megaton's attention op) with --reset-attention-mask's documents,
// s / doc in each sample: through SDPA with their boolean mask (backends -1, 0, 2), or each document alone through the
// variable-length flash kernel (9, the op's default for documents in bf16 on the GPU); against the same op causal (no
// documents: ATen's choice, cuDNN's causal kernels on the H200) in the same iteration. Counters: causal_ms, masked_ms
// (forward + backward), slowdown (masked / causal), useful_tflops (the document-local causal FLOPs over masked_ms: a
// kernel that skips the blocks across documents does this work only).
//
// BM_SdpaLayout/{b, s, np, d, layout}: causal SDPA (ATen's choice of backend, cuDNN on Hopper) forward + backward
// with q, k, v laid out in memory as 0: views of one [s, b, np, 3, d] QKV output (megaton's), 1: views of one
// [b, s, 3, np, d] (the PyTorch peer's [B, T, 3C] split), 2: three contiguous [b, s, np, d], 3: three contiguous
// [b, np, s, d], 4: three contiguous [s, b, np, d]. The gradients come from torch::autograd::grad (no accumulation,
// no stack into the QKV gradient): the kernels' own time for that layout. Counters fwd_ms, step_ms, tflops (causal
// FLOPs as BM_SdpaBackend's). Whether a layout change around the attention would pay.
//
// BM_AlibiFoldVsMask/{b, s, np, d}: ops::causal_attention with ALiBi (Megatron's slopes for np heads), folded into the
// heads (the default: 8 extra q/k columns, causal SDPA) against its 16-bit additive mask (--no-alibi-fold, SDPA over
// the whole square), and the causal op without ALiBi, forward + backward in the same iteration; q, k, v come from
// ops::split_qkv with the projection's bias, as in the model, so the backward includes the QKV gradient and its bias
// gradient. Counters: causal_ms,
// fold_ms, mask_ms, speedup (mask / fold), fold_cost (fold / causal). The iteration's time is the fold's.
//   build/perf/bench_attention     (an error row without CUDA or a LibTorch without backend switches, < 2.3)
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "bench_gpu_seconds.h"
#include "core/torch_compat.h"
#include "model/positions.h"
#include "ops/attention.h"
#include "ops/qkv_split.h"

#if MEGATON_TORCH_AT_LEAST(2, 3)
#define MEGATON_SDPA_BACKEND_SWITCHES 1
#include <ATen/Context.h>
#endif

namespace {

#ifdef MEGATON_SDPA_BACKEND_SWITCHES
// Leaves only one fused backend enabled (and the math fallback off, so an unsupported one fails loudly) for its
// lifetime; restores the context's choices after.
class OnlyBackend {
 public:
  explicit OnlyBackend(int backend) : ctx_(at::globalContext()) {
    saved_ = {ctx_.userEnabledCuDNNSDP(), ctx_.userEnabledFlashSDP(), ctx_.userEnabledMemEfficientSDP(),
              ctx_.userEnabledMathSDP()};
    set({backend == 0, backend == 1, backend == 2, false});
  }
  ~OnlyBackend() { set(saved_); }
  OnlyBackend(const OnlyBackend&) = delete;
  OnlyBackend& operator=(const OnlyBackend&) = delete;

 private:
  struct Choice {
    bool cudnn, flash, efficient, math;
  };
  void set(const Choice& c) {
    ctx_.setSDPUseCuDNN(c.cudnn);
    ctx_.setSDPUseFlash(c.flash);
    ctx_.setSDPUseMemEfficient(c.efficient);
    ctx_.setSDPUseMath(c.math);
  }
  at::Context& ctx_;
  Choice saved_{};
};
#endif

#ifdef MEGATON_HAVE_CUDA
// The timing loop of BM_SdpaBackend and BM_SdpaLayout: forward() alone without autograd, step() (forward + backward)
// with it, 10 calls each; counters fwd_ms, step_ms, tflops (causal FLOPs of `heads` = b np heads of s x d).
template <typename Forward, typename Step>
void time_causal_sdpa(benchmark::State& state, Forward&& forward, Step&& step, int64_t heads, int64_t s, int64_t d) {
  double fwd = 0, total = 0;
  for (auto _ : state) {
    {
      torch::NoGradGuard no_grad;
      fwd = megaton::perf::gpu_seconds(forward, 10);
    }
    {
      torch::AutoGradMode grad(true);
      total = megaton::perf::gpu_seconds(step, 10);
    }
    state.SetIterationTime(total);
  }
  const double flops = 2.0 * double(heads) * double(s) * double(s) * double(d) * 3.5;  // causal: fwd 2 s^2 d, bwd 2.5x
  state.counters["fwd_ms"] = fwd * 1e3;
  state.counters["step_ms"] = total * 1e3;
  state.counters["tflops"] = flops / total * 1e-12;
}

// One layer's attention as the model runs it, bf16 on the GPU: q, k, v from ops::split_qkv of qkv [s, b, np, 3, d]
// with the projection's bias, so a step's backward includes the QKV gradient and its bias gradient.
struct LayerAttention {
  torch::Tensor qkv, bias, dout;  // [s, b, np, 3, d], [np 3 d], [s, b, np*d]
  LayerAttention(int64_t b, int64_t s, int64_t np, int64_t d)
      : qkv(torch::randn({s, b, np, 3, d}, options()).requires_grad_()),
        bias(torch::zeros({np * 3 * d}, options()).requires_grad_()),
        dout(torch::randn({s, b, np * d}, options())) {}
  static torch::TensorOptions options() { return torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16); }
  // A forward + backward of ops::causal_attention with `opts`, the gradients dropped after.
  std::function<void()> step(const megaton::ops::AttentionOptions& opts) {
    return [this, opts] {
      const auto [q, k, v] = megaton::ops::split_qkv(qkv, bias);  // [s, b, np, d] each
      megaton::ops::causal_attention(q, k, v, opts).backward(dout);
      qkv.mutable_grad().reset();
      bias.mutable_grad().reset();
    };
  }
};
#endif

void BM_SdpaBackend(benchmark::State& state) {
  if (megaton::perf::skip_without_cuda(state)) return;
#if !defined(MEGATON_SDPA_BACKEND_SWITCHES) || !defined(MEGATON_HAVE_CUDA)
  state.SkipWithError("LibTorch without SDPA backend switches (needs >= 2.3)");
#else
  const int64_t b = state.range(0), s = state.range(1), np = state.range(2), d = state.range(3);
  const OnlyBackend only(int(state.range(4)));
  const double dropout = double(state.range(5)) / 1000.0;
  const auto o = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  torch::Tensor qkv = torch::randn({s, b, np, 3, d}, o).requires_grad_();          // [s, b, np, 3, d]
  torch::Tensor dout = torch::randn({b, np, s, d}, o);                             // [b, np, s, d]
  auto heads = [&](int64_t i) { return qkv.select(3, i).permute({1, 2, 0, 3}); };  // [b, np, s, d]
  auto forward = [&] {
    return megaton::compat::scaled_dot_product_attention(heads(0), heads(1), heads(2), torch::Tensor(), dropout, true);
  };
  auto step = [&] {
    forward().backward(dout);
    qkv.mutable_grad().reset();
  };
  try {
    step();  // warm-up; a backend that does not take these shapes throws here
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  time_causal_sdpa(state, forward, step, b * np, s, d);
#endif
}

void BM_DocumentMask(benchmark::State& state) {
  if (megaton::perf::skip_without_cuda(state)) return;
#if !defined(MEGATON_SDPA_BACKEND_SWITCHES) || !defined(MEGATON_HAVE_CUDA)
  state.SkipWithError("LibTorch without SDPA backend switches (needs >= 2.3)");
#else
  const int64_t b = state.range(0), s = state.range(1), np = state.range(2), d = state.range(3), doc = state.range(4);
  const int backend = int(state.range(5));
  LayerAttention layer(b, s, np, d);
  const torch::Tensor ids =
      torch::div(torch::arange(s, torch::TensorOptions().dtype(torch::kInt64).device(torch::kCUDA)), doc, "floor")
          .unsqueeze(0)
          .expand({b, s});  // [b, s]: document index of each token
  megaton::ops::AttentionOptions causal;
  megaton::ops::AttentionOptions masked;
  masked.documents = megaton::ops::Documents(ids, torch::kCUDA);
  masked.use_varlen = backend == 9;
  auto causal_step = layer.step(causal), masked_step = layer.step(masked);
  auto on_backend = [&](auto&& fn) {  // fn() with only the chosen SDPA backend enabled (-1: ATen's choice; 9: none)
    std::optional<OnlyBackend> only;
    if (backend >= 0 && backend != 9) only.emplace(backend);
    return fn();
  };
  double causal_s = 0, masked_s = 0;
  try {
    causal_step();  // warm-up; a backend that does not take the mask throws here
    on_backend(masked_step);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  for (auto _ : state) {
    causal_s = megaton::perf::gpu_seconds(causal_step, 10);
    masked_s = on_backend([&] { return megaton::perf::gpu_seconds(masked_step, 10); });
    state.SetIterationTime(masked_s);
  }
  // Document-local causal work: s / doc documents of doc^2 / 2 scores each (forward 2 s^2 d for the causal half of a
  // whole sequence, backward 2.5x).
  const double flops = 2.0 * double(b * np) * double(s) * double(doc) * double(d) * 3.5;
  state.counters["causal_ms"] = causal_s * 1e3;
  state.counters["masked_ms"] = masked_s * 1e3;
  state.counters["slowdown"] = masked_s / causal_s;
  state.counters["useful_tflops"] = flops / masked_s * 1e-12;
#endif
}

void BM_SdpaLayout(benchmark::State& state) {
  if (megaton::perf::skip_without_cuda(state)) return;
#if !defined(MEGATON_HAVE_CUDA)
  state.SkipWithError("not a CUDA build");
#else
  const int64_t b = state.range(0), s = state.range(1), np = state.range(2), d = state.range(3);
  const int64_t layout = state.range(4);
  const auto o = LayerAttention::options();
  torch::Tensor base;  // layouts 0 and 1: the one QKV output q, k, v are views of
  if (layout == 0) base = torch::randn({s, b, np, 3, d}, o);
  if (layout == 1) base = torch::randn({b, s, 3, np, d}, o);
  std::vector<torch::Tensor> heads;  // q, k, v: [b, np, s, d] views, leaves that require grad
  for (int64_t i = 0; i < 3; ++i) {
    torch::Tensor t;
    switch (layout) {
      case 0:
        t = base.select(3, i).permute({1, 2, 0, 3});
        break;
      case 1:
        t = base.select(2, i).transpose(1, 2);
        break;
      case 2:
        t = torch::randn({b, s, np, d}, o).transpose(1, 2);
        break;
      case 3:
        t = torch::randn({b, np, s, d}, o);
        break;
      default:
        t = torch::randn({s, b, np, d}, o).permute({1, 2, 0, 3});
        break;
    }
    heads.push_back(t.detach().requires_grad_());
  }
  auto forward = [&] {
    return megaton::compat::scaled_dot_product_attention(heads[0], heads[1], heads[2], torch::Tensor(), 0.0, true);
  };
  torch::Tensor dout;
  {
    torch::AutoGradMode grad(true);
    dout = torch::randn_like(forward());  // the output's own strides
  }
  auto step = [&] {
    torch::AutoGradMode grad(true);
    torch::autograd::grad({forward()}, heads, {dout});
  };
  step();  // warm-up
  time_causal_sdpa(state, forward, step, b * np, s, d);
#endif
}

void BM_AlibiFoldVsMask(benchmark::State& state) {
  if (megaton::perf::skip_without_cuda(state)) return;
#if !defined(MEGATON_HAVE_CUDA)
  state.SkipWithError("not a CUDA build");
#else
  const int64_t b = state.range(0), s = state.range(1), np = state.range(2), d = state.range(3);
  LayerAttention layer(b, s, np, d);
  megaton::ops::AttentionOptions causal, fold, mask;
  fold.alibi = mask.alibi = megaton::model::alibi_bias(int(np), 0, int(np), s, torch::kCUDA);  // [np, 1, s]
  mask.alibi_fold = false;
  if (!megaton::ops::uses_alibi_fold(layer.qkv.select(3, 0), fold)) {
    state.SkipWithError("the fold does not apply here (LibTorch < 2.1 or d % 8 != 0)");
    return;
  }
  // Each way keeps what it makes of the bias (the mask, the key columns) across calls, as a forward's later layers
  // reuse the first layer's: the steady per-layer cost.
  fold.alibi_mask_cache = std::make_shared<torch::Tensor>();
  mask.alibi_mask_cache = std::make_shared<torch::Tensor>();
  auto causal_step = layer.step(causal), fold_step = layer.step(fold), mask_step = layer.step(mask);
  causal_step(), fold_step(), mask_step();  // warm-up
  double causal_s = 0, fold_s = 0, mask_s = 0;
  for (auto _ : state) {
    causal_s = megaton::perf::gpu_seconds(causal_step, 10);
    mask_s = megaton::perf::gpu_seconds(mask_step, 10);
    fold_s = megaton::perf::gpu_seconds(fold_step, 10);
    state.SetIterationTime(fold_s);
  }
  state.counters["causal_ms"] = causal_s * 1e3;
  state.counters["fold_ms"] = fold_s * 1e3;
  state.counters["mask_ms"] = mask_s * 1e3;
  state.counters["speedup"] = mask_s / fold_s;
  state.counters["fold_cost"] = fold_s / causal_s;
#endif
}

}  // namespace

BENCHMARK(BM_AlibiFoldVsMask)
    ->ArgNames({"b", "s", "np", "d"})
    ->Args({32, 1024, 12, 64})
    ->Args({8, 2048, 16, 128})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_SdpaLayout)
    ->ArgNames({"b", "s", "np", "d", "layout"})
    ->ArgsProduct({{32}, {1024}, {12}, {64}, {0, 1, 2, 3, 4}})
    ->ArgsProduct({{8}, {2048}, {16}, {128}, {0, 1, 2, 3, 4}})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_DocumentMask)
    ->ArgNames({"b", "s", "np", "d", "doc", "backend"})
    ->ArgsProduct({{32}, {1024}, {12}, {64}, {256, 1024}, {-1, 0, 2, 9}})
    ->ArgsProduct({{8}, {2048}, {16}, {128}, {512, 2048}, {-1, 0, 2, 9}})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_SdpaBackend)
    ->ArgNames({"b", "s", "np", "d", "backend", "dropout"})
    ->ArgsProduct({{32}, {1024}, {12}, {64}, {0, 1, 2}, {0, 100}})
    ->ArgsProduct({{8}, {2048}, {16}, {128}, {0, 1, 2}, {0, 100}})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
