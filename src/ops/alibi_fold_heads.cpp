#include "ops/alibi_fold_heads.h"

#include <torch/csrc/autograd/custom_function.h>

#include "core/error.h"

namespace megaton::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kExtra = 8;  // the extra columns a head

// [q, q_extra] and [k, k_extra] through ATen; v as it is.
FoldedHeads fold_heads_cat(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                           const torch::Tensor& q_extra, const torch::Tensor& k_extra) {
  const int64_t s = q.size(0), b = q.size(1), np = q.size(2);
  return {torch::cat({q, q_extra.expand({s, b, np, kExtra})}, -1),  // [s, b, np, d + 8]
          torch::cat({k, k_extra.expand({s, b, np, kExtra})}, -1),  // [s, b, np, d + 8]
          v};
}

// The gradient of each input: the first d columns of its output's.
variable_list first_columns(const variable_list& grads, int64_t d) {
  variable_list out;
  for (const torch::Tensor& g : grads) out.push_back(g.defined() ? g.narrow(-1, 0, d) : g);  // [s, b, np, d]
  return out;
}

// The cat path: q', k' (v does not pass through here).
struct FoldHeadsCat : torch::autograd::Function<FoldHeadsCat> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& q_extra, const torch::Tensor& k_extra) {
    ctx->saved_data["d"] = q.size(-1);
    FoldedHeads f = fold_heads_cat(q, k, torch::Tensor(), q_extra, k_extra);
    return {f.q, f.k};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    variable_list g = first_columns(grads, ctx->saved_data["d"].toInt());
    return {g[0], g[1], torch::Tensor(), torch::Tensor()};
  }
};

#ifdef MEGATON_HAVE_CUDA
// The kernel's path: q', k', v' from one buffer.
struct FoldHeadsFused : torch::autograd::Function<FoldHeadsFused> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& q_extra, const torch::Tensor& k_extra) {
    ctx->saved_data["d"] = q.size(-1);
    FoldedHeads f = fold_heads_fused(q, k, v, q_extra, k_extra);
    return {f.q, f.k, f.v};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    variable_list g = first_columns(grads, ctx->saved_data["d"].toInt());
    return {g[0], g[1], g[2], torch::Tensor(), torch::Tensor()};
  }
};
#endif

}  // namespace

FoldedHeads fold_heads(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& q_extra, const torch::Tensor& k_extra) {
  MEGATON_ASSERT(q.dim() == 4 && k.sizes() == q.sizes() && v.sizes() == q.sizes() && q_extra.numel() == kExtra &&
                     k_extra.dim() == 4 && k_extra.size(0) == q.size(0) && k_extra.size(1) == 1 &&
                     k_extra.size(2) == q.size(2) && k_extra.size(3) == kExtra,
                 "fold_heads: q ", q.sizes(), ", k ", k.sizes(), ", v ", v.sizes(), ", q_extra ", q_extra.sizes(),
                 ", k_extra ", k_extra.sizes());
  const bool grad = (q.requires_grad() || k.requires_grad() || v.requires_grad()) && torch::GradMode::is_enabled();
#ifdef MEGATON_HAVE_CUDA
  if (fold_heads_fused_supported(q, k, v, q_extra, k_extra)) {
    if (!grad) return fold_heads_fused(q, k, v, q_extra, k_extra);
    variable_list out = FoldHeadsFused::apply(q, k, v, q_extra.detach(), k_extra.detach());
    return {out[0], out[1], out[2]};
  }
#endif
  if (!grad) return fold_heads_cat(q, k, v, q_extra, k_extra);
  variable_list out = FoldHeadsCat::apply(q, k, q_extra.detach(), k_extra.detach());
  return {out[0], out[1], v};
}

}  // namespace megaton::ops
