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
  torch::Tensor mask;  // undefined: is_causal
  if (o.alibi.defined()) {
    const auto opts = torch::TensorOptions().dtype(q.scalar_type()).device(q.device());
    const double inf = std::numeric_limits<float>::infinity();
    torch::Tensor masked = o.mask.defined()
                               ? torch::zeros({b, 1, s, s}, opts).masked_fill(o.mask, -inf)          // [b, 1, s, s]
                               : torch::full({s, s}, -inf, opts).triu(1).unsqueeze(0).unsqueeze(0);  // [1, 1, s, s]
    mask = o.alibi.to(q.scalar_type()).narrow(-1, 0, s).unsqueeze(0) + masked;  // [b or 1, np, s, s]
  } else if (o.mask.defined()) {
    mask = o.mask.logical_not();  // [b, 1, s, s]: SDPA's boolean masks are true where attention is allowed
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

void check_mask(const torch::Tensor& mask, const torch::Tensor& q) {
  if (!mask.defined()) return;
  const int64_t s = q.size(0), b = q.size(1);
  MEGATON_CHECK(mask.scalar_type() == torch::kBool && mask.dim() == 4 && mask.size(0) == b && mask.size(1) == 1 &&
                    mask.size(2) == s && mask.size(3) == s,
                InternalError, "attention mask: expected bool [", b, ", 1, ", s, ", ", s, "], got ", mask.scalar_type(),
                " ", mask.sizes());
}

}  // namespace

torch::Tensor document_mask(const torch::Tensor& document_ids) {
  const int64_t s = document_ids.size(1);
  const torch::Tensor later =
      torch::ones({s, s}, torch::TensorOptions().dtype(torch::kBool).device(document_ids.device())).triu(1);  // j > i
  return (document_ids.unsqueeze(2) != document_ids.unsqueeze(1)).logical_or(later).unsqueeze(1);  // [b, 1, s, s]
}

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
  check_mask(o.mask, q);
  const torch::Tensor masked =
      o.mask.defined() ? o.mask  // [b, 1, s, s]
                       : torch::ones({s, s}, torch::TensorOptions().dtype(torch::kBool).device(q.device())).triu(1);
  x = x.masked_fill(masked, -10000.0);
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
  if (compat::kHasSdpa && o.use_fused) {
    check_mask(o.mask, q);
    return attention_fused(q, k, v, o);
  }
  return causal_attention_explicit(q, k, v, o);
}

}  // namespace megaton::ops
