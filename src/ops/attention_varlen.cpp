#include "ops/attention_varlen.h"

#include "core/error.h"
#include "core/torch_compat.h"

namespace megaton::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct VarlenFlash : public torch::autograd::Function<VarlenFlash> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& cu_seqlens, int64_t max_len,
                               double dropout_p) {
    const compat::VarlenFlashOut f = compat::varlen_flash_forward(q, k, v, cu_seqlens, max_len, dropout_p);
    ctx->save_for_backward({q, k, v, f.out});
    ctx->saved_data["logsumexp"] = f.logsumexp;  // [n, heads, max_len] fp32 (or [heads, t], by version)
    ctx->saved_data["rng_state"] = f.rng_state;
    ctx->saved_data["unused"] = f.unused;
    ctx->saved_data["cu_seqlens"] = cu_seqlens;
    ctx->saved_data["max_len"] = max_len;
    ctx->saved_data["dropout_p"] = dropout_p;
    return f.out;  // [t, heads, d]
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const variable_list saved = ctx->get_saved_variables();
    compat::VarlenFlashOut f;
    f.out = saved[3];
    f.logsumexp = ctx->saved_data["logsumexp"].toTensor();
    f.rng_state = ctx->saved_data["rng_state"].toTensor();
    f.unused = ctx->saved_data["unused"].toTensor();
    auto [dq, dk, dv] = compat::varlen_flash_backward(
        grad[0].contiguous(), saved[0], saved[1], saved[2], f, ctx->saved_data["cu_seqlens"].toTensor(),
        ctx->saved_data["max_len"].toInt(), ctx->saved_data["dropout_p"].toDouble());
    return {dq, dk, dv, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor varlen_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                      const torch::Tensor& cu_seqlens, int64_t max_len, double dropout_p) {
  MEGATON_CHECK(q.dim() == 3 && k.sizes() == q.sizes() && v.sizes() == q.sizes() && q.stride(-1) == 1 &&
                    k.stride(-1) == 1 && v.stride(-1) == 1,
                InternalError, "varlen attention: expected q, k, v [t, heads, d] with unit last stride, got ",
                q.sizes(), " ", k.sizes(), " ", v.sizes());
  MEGATON_CHECK(cu_seqlens.scalar_type() == torch::kInt32 && cu_seqlens.dim() == 1 && cu_seqlens.size(0) >= 2 &&
                    cu_seqlens.device() == q.device() && max_len > 0,
                InternalError, "varlen attention: expected cu_seqlens [n + 1] int32 on ", q.device(), ", got ",
                cu_seqlens.scalar_type(), " ", cu_seqlens.sizes(), " on ", cu_seqlens.device(), ", max_len ", max_len);
  return VarlenFlash::apply(q, k, v, cu_seqlens, max_len, dropout_p);
}

}  // namespace megaton::ops
