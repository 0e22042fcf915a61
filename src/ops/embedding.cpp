#include "ops/embedding.h"

#include <torch/csrc/autograd/custom_function.h>

#include "core/error.h"

namespace megaton::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct EmbeddingMainGrad : torch::autograd::Function<EmbeddingMainGrad> {
  // weight [V, h], ids [..], main fp32 [V, h], overwrite: its CPU flag [1] or an empty placeholder.
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor weight, torch::Tensor ids, torch::Tensor main,
                               torch::Tensor overwrite) {
    ctx->save_for_backward({ids});
    ctx->saved_data["main"] = main;
    ctx->saved_data["overwrite"] = overwrite;
    return torch::embedding(weight, ids);  // [.., h]
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const torch::Tensor ids = ctx->get_saved_variables()[0].reshape({-1});  // [n]
    const MainGrad target = saved_main_grad(ctx, "main", "overwrite");
    const torch::Tensor grad = grads[0].reshape({ids.size(0), target.grad.size(1)});  // [n, h]
    torch::NoGradGuard no_grad;
    if (consume_overwrite(target)) target.grad.zero_();  // nothing of this iteration in it yet
    accumulate_embedding_grad(target.grad, ids, grad);
    return {torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

void accumulate_embedding_grad(const torch::Tensor& main, const torch::Tensor& ids, const torch::Tensor& grad) {
  MEGATON_ASSERT(main.scalar_type() == torch::kFloat32 && main.dim() == 2 && grad.dim() == 2 && ids.dim() == 1 &&
                     grad.size(0) == ids.size(0) && grad.size(1) == main.size(1),
                 "accumulate_embedding_grad: main grad ", main.sizes(), ", ids ", ids.sizes(), ", grad ", grad.sizes());
#ifdef MEGATON_HAVE_CUDA
  if (accumulate_embedding_grad_cuda(main, ids, grad)) return;
#endif
  torch::Tensor m = main;
  m.index_add_(0, ids, grad.to(torch::kFloat32));
}

torch::Tensor embedding(const torch::Tensor& weight, const torch::Tensor& ids, const MainGrad& main_grad) {
  if (!main_grad.defined() || !weight.requires_grad() || !torch::GradMode::is_enabled())
    return torch::embedding(weight, ids);
  MEGATON_ASSERT(main_grad.grad.sizes() == weight.sizes(), "embedding: main grad ", main_grad.grad.sizes(),
                 " for weight ", weight.sizes());
  auto [main, overwrite] = main_grad_inputs(main_grad);
  return EmbeddingMainGrad::apply(weight, ids, main, overwrite);
}

}  // namespace megaton::ops
