#include "ops/layer_norm.h"

#include "core/error.h"
#include "ops/dropout.h"
#include "ops/layer_norm_cuda.h"

namespace megaton::ops {

torch::Tensor layer_norm(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, double eps,
                         bool use_fused, const LayerNormMainGrads& main_grads) {
#ifdef MEGATON_HAVE_CUDA
  if (use_fused && fused_layer_norm_supported(x, weight, bias))
    return fused_layer_norm(x, weight, bias, eps, main_grads);
#endif
  (void)main_grads;
  const auto dtype = x.scalar_type();
  const bool half = dtype == torch::kBFloat16 || dtype == torch::kFloat16;
  if (dtype == torch::kFloat32 && weight.scalar_type() != torch::kFloat32) {  // fp32 residual stream, 16-bit model
    return torch::layer_norm(x, {x.size(-1)}, weight.to(torch::kFloat32), bias.to(torch::kFloat32), eps)
        .to(weight.scalar_type());
  }
  if (half && x.device().is_cpu()) {
    return torch::layer_norm(x.to(torch::kFloat32), {x.size(-1)}, weight.to(torch::kFloat32), bias.to(torch::kFloat32),
                             eps)
        .to(dtype);
  }
  return torch::layer_norm(x, {x.size(-1)}, weight, bias, eps);
}

AddLayerNorm add_layer_norm(const torch::Tensor& x_in, const torch::Tensor& residual, const torch::Tensor& weight,
                            const torch::Tensor& bias, double eps, bool use_fused, const LayerNormMainGrads& main_grads,
                            const HiddenDropout& dropout) {
  const bool drop = dropout.p > 0.0;
  MEGATON_ASSERT(!drop || dropout.generator != nullptr, "add_layer_norm: dropout without a generator");
#ifdef MEGATON_HAVE_CUDA
  if (use_fused && fused_add_layer_norm_supported(x_in, residual, weight, bias)) {
    const bool in_kernel = drop && dropout.fused && fused_dropout_add_layer_norm_supported(x_in, dropout);
    const torch::Tensor x = drop && !in_kernel ? ops::dropout(x_in, dropout.p, *dropout.generator) : x_in;
    FusedAddLayerNormOutput f =
        fused_add_layer_norm(x, residual, weight, bias, eps, main_grads, in_kernel ? dropout : HiddenDropout{});
    return {f.sum, f.y};
  }
#endif
  const torch::Tensor x = drop ? ops::dropout(x_in, dropout.p, *dropout.generator) : x_in;
  torch::Tensor sum = x + residual;
  return {sum, layer_norm(sum, weight, bias, eps, use_fused, main_grads)};
}

}  // namespace megaton::ops
