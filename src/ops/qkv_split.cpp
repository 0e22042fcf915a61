#include "ops/qkv_split.h"

#include <torch/csrc/autograd/custom_function.h>

#include "core/error.h"
#include "ops/gelu_bias_grad.h"

namespace megaton::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct SplitQkv : torch::autograd::Function<SplitQkv> {
  // qkv [s, b, np, 3, d]; bias [np 3 d] or an empty placeholder (autograd functions take no undefined tensors).
  static variable_list forward(AutogradContext* ctx, torch::Tensor qkv, torch::Tensor bias, torch::Tensor b_main,
                               torch::Tensor b_overwrite) {
    ctx->saved_data["has_bias"] = bias.numel() > 0;
    ctx->saved_data["b_main"] = b_main;  // the bias's main grad (or empty placeholders)
    ctx->saved_data["b_overwrite"] = b_overwrite;
    ctx->saved_data["shape"] = qkv.sizes().vec();
    return {qkv.select(3, 0), qkv.select(3, 1), qkv.select(3, 2)};  // [s, b, np, d] each
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const std::vector<int64_t> shape = ctx->saved_data["shape"].toIntVector();
    const bool has_bias = ctx->saved_data["has_bias"].toBool();
    torch::Tensor dq = grads[0], dk = grads[1], dv = grads[2];
    const torch::Tensor any = dq.defined() ? dq : (dk.defined() ? dk : dv);
    const torch::Tensor none;
    if (!any.defined()) return {none, none, none, none};
    const MainGrad b_main = saved_main_grad(ctx, "b_main", "b_overwrite");
    std::vector<int64_t> part_shape = shape;
    part_shape.erase(part_shape.begin() + 3);  // [s, b, np, d]
    // an output the loss did not use: zeros
    auto zeros = [&](const torch::Tensor& g) { return g.defined() ? g : torch::zeros(part_shape, any.options()); };
    dq = zeros(dq), dk = zeros(dk), dv = zeros(dv);
#ifdef MEGATON_HAVE_CUDA
    if (has_bias && qkv_interleave_fused_supported(dq, dk, dv)) {
      auto [d_qkv, db] = qkv_interleave_bias_grad_fused(dq, dk, dv, b_main);  // [s, b, np, 3, d], [np 3 d] or none
      return {d_qkv, db, none, none};
    }
#endif
    torch::Tensor d_qkv = torch::stack({dq, dk, dv}, 3);  // [s, b, np, 3, d]
    torch::Tensor db = has_bias ? bias_grad(d_qkv.reshape({-1, shape[2] * 3 * shape[4]}), b_main) : torch::Tensor();
    return {d_qkv, db, none, none};
  }
};

}  // namespace

std::array<torch::Tensor, 3> split_qkv(const torch::Tensor& qkv, const torch::Tensor& bias,
                                       const MainGrad& bias_main_grad) {
  MEGATON_ASSERT(qkv.dim() == 5 && qkv.size(3) == 3, "split_qkv: qkv must be [s, b, np, 3, d], got ", qkv.sizes());
  if (!bias.defined() || !bias.requires_grad() || !torch::GradMode::is_enabled()) {
    const std::vector<torch::Tensor> parts = qkv.unbind(3);  // [s, b, np, d] each
    return {parts[0], parts[1], parts[2]};
  }
  MEGATON_ASSERT(bias.numel() == qkv.size(2) * 3 * qkv.size(4), "split_qkv: bias of ", bias.numel(),
                 " elements for qkv ", qkv.sizes());
  auto [b_main, b_overwrite] = main_grad_inputs(bias_main_grad);
  variable_list out = SplitQkv::apply(qkv, bias, b_main, b_overwrite);
  return {out[0], out[1], out[2]};
}

}  // namespace megaton::ops
