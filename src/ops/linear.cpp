#include "ops/linear.h"

#include <torch/csrc/autograd/custom_function.h>

#include "core/error.h"
#include "ops/gelu_bias_grad.h"

namespace megaton::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct LinearMainGrad : torch::autograd::Function<LinearMainGrad> {
  // b: [out] or an empty placeholder (autograd functions take no undefined tensors); main: fp32 [out, in].
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, torch::Tensor w, torch::Tensor b,
                               torch::Tensor main) {
    const bool has_b = b.numel() > 0;
    ctx->save_for_backward({x, w});
    ctx->saved_data["has_b"] = has_b;
    ctx->saved_data["main"] = main;
    return torch::linear(x, w, has_b ? b : torch::Tensor());  // [.., out]
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &w = saved[1];
    const torch::Tensor& dy = grads[0];                                    // [.., out]
    const torch::Tensor dy2 = dy.reshape({-1, dy.size(-1)}).contiguous();  // [T, out]
    const torch::Tensor x2 = x.reshape({-1, x.size(-1)}).contiguous();     // [T, in]
    torch::Tensor dx = ctx->needs_input_grad(0) ? torch::matmul(dy, w) : torch::Tensor();
    weight_grad(dy2, x2, ctx->saved_data["main"].toTensor());                                 // into the main grad
    torch::Tensor db = ctx->saved_data["has_b"].toBool() ? bias_grad(dy2) : torch::Tensor();  // [out]
    return {dx, torch::Tensor(), db, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor weight_grad(const torch::Tensor& dy, const torch::Tensor& x, const torch::Tensor& main_grad) {
  if (!main_grad.defined()) return torch::mm(dy.t(), x);  // [out, in]
  MEGATON_ASSERT(main_grad.scalar_type() == torch::kFloat32 && main_grad.dim() == 2 &&
                     main_grad.size(0) == dy.size(1) && main_grad.size(1) == x.size(1) && dy.size(0) == x.size(0),
                 "weight_grad: main grad ", main_grad.sizes(), " for dy ", dy.sizes(), " and x ", x.sizes());
  torch::NoGradGuard no_grad;
#ifdef MEGATON_HAVE_CUDA
  if (accumulate_weight_grad_cuda(main_grad, dy, x)) return {};
#endif
  torch::Tensor main = main_grad;
  main.addmm_(dy.t().to(torch::kFloat32), x.to(torch::kFloat32));
  return {};
}

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                     const torch::Tensor& main_grad) {
  if (!main_grad.defined() || !w.requires_grad() || !torch::GradMode::is_enabled()) return torch::linear(x, w, b);
  return LinearMainGrad::apply(x, w, b.defined() ? b : torch::empty({0}, w.options()), main_grad);
}

}  // namespace megaton::ops
