#include "ops/alibi_fold_heads.h"

#include <torch/csrc/autograd/custom_function.h>

#include "core/error.h"

namespace megaton::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kExtra = 8;  // the extra columns a head

// [q, q_extra] and [k, k_extra] without autograd: by the kernel where it takes them, else through ATen.
std::pair<torch::Tensor, torch::Tensor> fold_heads_values(const torch::Tensor& q, const torch::Tensor& k,
                                                          const torch::Tensor& q_extra, const torch::Tensor& k_extra) {
#ifdef MEGATON_HAVE_CUDA
  if (fold_heads_fused_supported(q, k, q_extra, k_extra)) return fold_heads_fused(q, k, q_extra, k_extra);
#endif
  const int64_t s = q.size(0), b = q.size(1), np = q.size(2);
  return {torch::cat({q, q_extra.expand({s, b, np, kExtra})}, -1),   // [s, b, np, d + 8]
          torch::cat({k, k_extra.expand({s, b, np, kExtra})}, -1)};  // [s, b, np, d + 8]
}

struct FoldHeads : torch::autograd::Function<FoldHeads> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& q_extra, const torch::Tensor& k_extra) {
    ctx->saved_data["d"] = q.size(-1);
    auto [qf, kf] = fold_heads_values(q, k, q_extra, k_extra);
    return {qf, kf};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const int64_t d = ctx->saved_data["d"].toInt();
    const auto first_d = [d](const torch::Tensor& g) { return g.defined() ? g.narrow(-1, 0, d) : g; };  // [s,b,np,d]
    return {first_d(grads[0]), first_d(grads[1]), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

std::pair<torch::Tensor, torch::Tensor> fold_heads(const torch::Tensor& q, const torch::Tensor& k,
                                                   const torch::Tensor& q_extra, const torch::Tensor& k_extra) {
  MEGATON_ASSERT(q.dim() == 4 && k.sizes() == q.sizes() && q_extra.numel() == kExtra && k_extra.dim() == 4 &&
                     k_extra.size(0) == q.size(0) && k_extra.size(1) == 1 && k_extra.size(2) == q.size(2) &&
                     k_extra.size(3) == kExtra,
                 "fold_heads: q ", q.sizes(), ", k ", k.sizes(), ", q_extra ", q_extra.sizes(), ", k_extra ",
                 k_extra.sizes());
  if (!(q.requires_grad() || k.requires_grad()) || !torch::GradMode::is_enabled())
    return fold_heads_values(q, k, q_extra, k_extra);
  variable_list out = FoldHeads::apply(q, k, q_extra.detach(), k_extra.detach());
  return {out[0], out[1]};
}

}  // namespace megaton::ops
