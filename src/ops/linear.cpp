#include "ops/linear.h"

#include <torch/csrc/autograd/custom_function.h>

#include "core/error.h"
#include "ops/gelu_bias_grad.h"

namespace megaton::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct LinearMainGrad : torch::autograd::Function<LinearMainGrad> {
  // b: [out] or an empty placeholder (autograd functions take no undefined tensors); main: fp32 [out, in]; overwrite:
  // its CPU flag [1] or an empty placeholder.
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, torch::Tensor w, torch::Tensor b,
                               torch::Tensor main, torch::Tensor overwrite, torch::Tensor b_main,
                               torch::Tensor b_overwrite) {
    const bool has_b = b.numel() > 0;
    ctx->save_for_backward({x, w});
    ctx->saved_data["has_b"] = has_b;
    ctx->saved_data["main"] = main;
    ctx->saved_data["overwrite"] = overwrite;
    ctx->saved_data["b_main"] = b_main;  // the bias's main grad (or empty placeholders)
    ctx->saved_data["b_overwrite"] = b_overwrite;
    return torch::linear(x, w, has_b ? b : torch::Tensor());  // [.., out]
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &w = saved[1];
    const torch::Tensor& dy = grads[0];                                    // [.., out]
    const torch::Tensor dy2 = dy.reshape({-1, dy.size(-1)}).contiguous();  // [T, out]
    const torch::Tensor x2 = x.reshape({-1, x.size(-1)}).contiguous();     // [T, in]
    torch::Tensor dx = ctx->needs_input_grad(0) ? torch::matmul(dy, w) : torch::Tensor();
    weight_grad(dy2, x2, saved_main_grad(ctx, "main", "overwrite"));                       // into the main grad
    const bool db_wanted = ctx->saved_data["has_b"].toBool() && ctx->needs_input_grad(2);  // not a detached bias
    const torch::Tensor db =
        db_wanted ? bias_grad(dy2, saved_main_grad(ctx, "b_main", "b_overwrite")) : torch::Tensor();  // [out] or none
    const torch::Tensor none;
    return {dx, none, db, none, none, none, none};
  }
};

torch::Tensor or_empty(const torch::Tensor& t, const torch::TensorOptions& o) {
  return t.defined() ? t : torch::empty({0}, o);
}

}  // namespace

MainGrad saved_main_grad(torch::autograd::AutogradContext* ctx, const char* grad_key, const char* overwrite_key) {
  torch::Tensor g = ctx->saved_data[grad_key].toTensor(), o = ctx->saved_data[overwrite_key].toTensor();
  return {g.numel() > 0 ? g : torch::Tensor(), o.numel() > 0 ? o : torch::Tensor()};
}

std::pair<torch::Tensor, torch::Tensor> main_grad_inputs(const MainGrad& m) {
  return {or_empty(m.grad, torch::TensorOptions().dtype(torch::kFloat32)),
          or_empty(m.overwrite, torch::TensorOptions().dtype(torch::kBool))};
}

torch::Tensor weight_grad(const torch::Tensor& dy, const torch::Tensor& x, const MainGrad& target) {
  if (!target.defined()) return torch::mm(dy.t(), x);  // [out, in]
  const torch::Tensor& main_grad = target.grad;
  MEGATON_ASSERT(main_grad.scalar_type() == torch::kFloat32 && main_grad.dim() == 2 &&
                     main_grad.size(0) == dy.size(1) && main_grad.size(1) == x.size(1) && dy.size(0) == x.size(0),
                 "weight_grad: main grad ", main_grad.sizes(), " for dy ", dy.sizes(), " and x ", x.sizes());
  torch::NoGradGuard no_grad;
  const bool overwrite = consume_overwrite(target);
  bool done = false;
#ifdef MEGATON_HAVE_CUDA
  done = accumulate_weight_grad_cuda(main_grad, dy, x, overwrite);
#endif
  if (!done) {
    torch::Tensor main = main_grad;
    main.addmm_(dy.t().to(torch::kFloat32), x.to(torch::kFloat32), /*beta=*/overwrite ? 0 : 1);
  }
  return {};
}

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, const MainGrad& main_grad,
                     const MainGrad& bias_main_grad) {
  if (!main_grad.defined() || !w.requires_grad() || !torch::GradMode::is_enabled()) return torch::linear(x, w, b);
  auto [main, overwrite] = main_grad_inputs(main_grad);
  auto [b_main, b_overwrite] = main_grad_inputs(b.defined() ? bias_main_grad : MainGrad{});
  return LinearMainGrad::apply(x, w, or_empty(b, w.options()), main, overwrite, b_main, b_overwrite);
}

bool main_grad_takes_sums(const MainGrad& m, int64_t n, const torch::Device& device) {
  return m.defined() && m.grad.scalar_type() == torch::kFloat32 && m.grad.is_contiguous() && m.grad.numel() == n &&
         m.grad.device() == device;
}

bool consume_overwrite(const MainGrad& m) {
  if (!m.overwrite.defined() || !m.overwrite.item<bool>()) return false;
  m.overwrite.fill_(false);
  return true;
}

}  // namespace megaton::ops
