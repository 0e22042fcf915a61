#include "parallel/tensor/lm_head_loss.h"

#include <torch/csrc/autograd/custom_function.h>

#include "core/error.h"
#include "parallel/tensor/cross_entropy.h"

namespace megaton::parallel {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct LmHeadCrossEntropy : torch::autograd::Function<LmHeadCrossEntropy> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor hidden, torch::Tensor weight, torch::Tensor target,
                               const dist::CommunicatorPtr& comm, int64_t valid_columns, bool use_fused,
                               torch::Tensor w_main, torch::Tensor w_overwrite) {
    const torch::Tensor h2 = hidden.reshape({-1, hidden.size(-1)}).contiguous();  // [T, h]
    torch::Tensor logits = torch::mm(h2, weight.t());                             // [T, v]
    torch::Tensor loss = cross_entropy_loss_grad_(logits, target.reshape({-1}), comm, valid_columns, use_fused);
    ctx->save_for_backward({h2, weight, logits});  // logits now hold G = softmax - one_hot
    ctx->saved_data["hidden_sizes"] = hidden.sizes().vec();
    ctx->saved_data["w_main"] = w_main;  // the weight's main grad (or empty placeholders)
    ctx->saved_data["w_overwrite"] = w_overwrite;
    return loss.view(target.sizes());  // [s, b]
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const torch::Tensor &h2 = saved[0], &weight = saved[1], &g_logits = saved[2];  // [T, h], [v, h], [T, v]
    const torch::Tensor g = grads[0].reshape({-1, 1});                             // [T, 1] fp32 (fp64)
    // x * g per row, computed in g's precision and rounded once to x's dtype (one pass over the small operand); on
    // CUDA by kernels::scale_rows (ATen's mixed-dtype multiply is not vectorised: 0.11 ms at [32768, 768] bf16 on an
    // H200, ~4x the time its bytes take).
    auto scaled_rows = [&](const torch::Tensor& x, torch::Tensor out) {
#ifdef MEGATON_HAVE_CUDA
      if (scale_rows_cuda(x, g, out)) return out;
#endif
      return torch::mul_out(out, x, g);
    };
    torch::Tensor d_hidden, d_weight;
    if (ctx->needs_input_grad(0)) {
      const torch::Tensor gw = torch::mm(g_logits, weight);  // [T, h], scaled in place
      d_hidden = scaled_rows(gw, gw).view(ctx->saved_data["hidden_sizes"].toIntVector());
    }
    if (ctx->needs_input_grad(1))  // [v, h], or into the main grad
      d_weight = ops::weight_grad(g_logits, scaled_rows(h2, torch::empty_like(h2)),
                                  ops::saved_main_grad(ctx, "w_main", "w_overwrite"));
    const torch::Tensor none;
    return {d_hidden, d_weight, none, none, none, none, none, none};
  }
};

}  // namespace

torch::Tensor lm_head_cross_entropy(const torch::Tensor& hidden, const torch::Tensor& weight,
                                    const torch::Tensor& target, const dist::CommunicatorPtr& tp, int64_t valid_columns,
                                    bool use_fused, const ops::MainGrad& weight_main_grad) {
  MEGATON_ASSERT(
      hidden.dim() == target.dim() + 1 && hidden.sizes().slice(0, target.dim()) == target.sizes() &&
          weight.dim() == 2 && weight.size(1) == hidden.size(-1) && weight.scalar_type() == hidden.scalar_type(),
      "lm_head_cross_entropy: hidden ", hidden.sizes(), ", weight ", weight.sizes(), ", targets ", target.sizes());
  auto [w_main, w_overwrite] = ops::main_grad_inputs(weight_main_grad);
  return LmHeadCrossEntropy::apply(hidden, weight, target.to(torch::kInt64), tp, valid_columns, use_fused, w_main,
                                   w_overwrite);
}

}  // namespace megaton::parallel
