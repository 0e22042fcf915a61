#include "ops/gelu_bias_grad.h"

namespace megaton::ops {

std::pair<torch::Tensor, torch::Tensor> gelu_backward_bias_grad_aten(const torch::Tensor& d_act,
                                                                     const torch::Tensor& pre) {
  torch::Tensor d_pre = torch::gelu_backward(d_act, pre, "tanh");  // [T, f]
  return {d_pre, d_pre.sum(0)};                                    // [f]
}

std::pair<torch::Tensor, torch::Tensor> gelu_backward_bias_grad(const torch::Tensor& d_act, const torch::Tensor& pre,
                                                                const MainGrad& main) {
#ifdef MEGATON_HAVE_CUDA
  if (gelu_bias_grad_fused_supported(d_act, pre)) return gelu_backward_bias_grad_fused(d_act, pre, {}, main);
#endif
  (void)main;
  return gelu_backward_bias_grad_aten(d_act, pre);
}

torch::Tensor bias_grad(const torch::Tensor& dy, const MainGrad& main) {
#ifdef MEGATON_HAVE_CUDA
  if (gelu_bias_grad_fused_supported(dy, dy)) return bias_grad_fused(dy, main);
#endif
  (void)main;
  return dy.sum(0);  // [n]
}

}  // namespace megaton::ops
