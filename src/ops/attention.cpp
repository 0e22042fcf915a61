#include "ops/attention.h"

#include <cmath>
#include <limits>
#include <mutex>

#include "core/error.h"
#include "core/torch_compat.h"

namespace megaton::ops {

namespace {

bool is_half(const torch::Tensor& t) {
  return t.scalar_type() == torch::kBFloat16 || t.scalar_type() == torch::kFloat16;
}

// Runs the fused kernel's dropout on our TP generator: the device's default generator takes the TP generator's state
// for the duration and hands the advanced state back (Megatron's tracker fork does the same with the CUDA state).
// The generator's mutex is held only while the states are swapped, never across the kernel: ATen's dropout (CPU
// bernoulli_, the CUDA kernels' philox offset) locks that same non-recursive mutex itself, so holding it for the scope
// deadlocked the first forward with attention dropout on LibTorch >= 2 (found on the GPU node's build, twelfth
// 2026-12-04 session: ModelGpt.RecomputationGivesTheSameGradientsWithDropout never returned). The swap assumes no other
// thread draws from the default generator meanwhile, which holds for the training loop (one host thread per rank).
class ScopedDefaultGenerator {
 public:
  ScopedDefaultGenerator(torch::Device device, at::Generator& mine)
      : global_(at::globalContext().defaultGenerator(device)), mine_(mine) {
    const std::lock_guard<std::mutex> lock(global_.mutex());
    saved_ = global_.get_state();
    global_.set_state(mine_.get_state());
  }
  ~ScopedDefaultGenerator() {
    const std::lock_guard<std::mutex> lock(global_.mutex());
    mine_.set_state(global_.get_state());
    global_.set_state(saved_);
  }
  ScopedDefaultGenerator(const ScopedDefaultGenerator&) = delete;
  ScopedDefaultGenerator& operator=(const ScopedDefaultGenerator&) = delete;

 private:
  at::Generator global_;
  at::Generator& mine_;
  torch::Tensor saved_;
};

torch::Tensor attention_fused(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const AttentionOptions& o) {
  const int64_t s = q.size(0), b = q.size(1), np = q.size(2), d = q.size(3);
  torch::Tensor qb = q.permute({1, 2, 0, 3});  // [b, np, s, d]
  torch::Tensor kb = k.permute({1, 2, 0, 3});
  torch::Tensor vb = v.permute({1, 2, 0, 3});
  torch::Tensor mask;
  if (o.alibi.defined()) {
    torch::Tensor causal = torch::full({s, s}, -std::numeric_limits<float>::infinity(),
                                       torch::TensorOptions().dtype(q.scalar_type()).device(q.device()))
                               .triu(1);                                          // [s, s]
    mask = (o.alibi.to(q.scalar_type()).narrow(-1, 0, s) + causal).unsqueeze(0);  // [1, np, s, s]
  }
  const double p = o.training ? o.dropout_p : 0.0;
  torch::Tensor ctx;
  if (p > 0.0) {
    MEGATON_ASSERT(o.dropout_generator != nullptr, "attention dropout without a generator");
    ScopedDefaultGenerator swap(q.device(), *o.dropout_generator);
    ctx = compat::scaled_dot_product_attention(qb, kb, vb, mask, p, !mask.defined());
  } else {
    ctx = compat::scaled_dot_product_attention(qb, kb, vb, mask, 0.0, !mask.defined());
  }
  return ctx.permute({2, 0, 1, 3}).reshape({s, b, np * d});  // [s, b, np*d]
}

}  // namespace

torch::Tensor causal_attention_explicit(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                        const AttentionOptions& o) {
  const int64_t s = q.size(0), b = q.size(1), np = q.size(2), d = q.size(3);
  const double coeff = o.layer_scale;
  const double norm_factor = std::sqrt(double(d)) * coeff;
  torch::Tensor q2 = q.reshape({s, b * np, d}).transpose(0, 1);     // [b*np, s, d]
  torch::Tensor k2 = k.reshape({s, b * np, d}).permute({1, 2, 0});  // [b*np, d, s]
  torch::Tensor scores;                                             // [b*np, s, s]
  if (o.alibi.defined()) {
    torch::Tensor bias = o.alibi.to(q.scalar_type()).narrow(-1, 0, s).repeat({b, 1, 1}).expand({b * np, s, s});
    scores = torch::baddbmm(bias, q2, k2, /*beta=*/1.0 / coeff, /*alpha=*/1.0 / norm_factor);
  } else {
    scores = torch::bmm(q2, k2) * (1.0 / norm_factor);
  }
  scores = scores.view({b, np, s, s});
  const bool fp32_softmax = is_half(q) && (o.softmax_in_fp32 || coeff != 1.0 || q.device().is_cpu());
  torch::Tensor x = fp32_softmax ? scores.to(torch::kFloat32) : scores;
  if (coeff != 1.0) x = x * coeff;
  torch::Tensor causal = torch::ones({s, s}, torch::TensorOptions().dtype(torch::kBool).device(q.device())).triu(1);
  x = x.masked_fill(causal, -10000.0);
  torch::Tensor probs = torch::softmax(x, -1).to(q.scalar_type());  // [b, np, s, s]
  if (o.training && o.dropout_p > 0.0) {
    MEGATON_ASSERT(o.dropout_generator != nullptr, "attention dropout without a generator");
    torch::Tensor keep = torch::empty_like(probs).bernoulli_(1.0 - o.dropout_p, *o.dropout_generator);
    probs = probs * keep * (1.0 / (1.0 - o.dropout_p));
  }
  torch::Tensor v2 = v.reshape({s, b * np, d}).transpose(0, 1);                  // [b*np, s, d]
  torch::Tensor ctx = torch::bmm(probs.view({b * np, s, s}), v2);                // [b*np, s, d]
  return ctx.view({b, np, s, d}).permute({2, 0, 1, 3}).reshape({s, b, np * d});  // [s, b, np*d]
}

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const AttentionOptions& o) {
  if (compat::kHasSdpa && o.use_fused) return attention_fused(q, k, v, o);
  return causal_attention_explicit(q, k, v, o);
}

}  // namespace megaton::ops
