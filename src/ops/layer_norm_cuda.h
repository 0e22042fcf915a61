// The fused CUDA LayerNorm (layer_norm_cuda.cpp, kernels/layer_norm_kernels.cu), declared only in CUDA builds
// (MEGATON_HAVE_CUDA). ops::layer_norm takes it for CUDA tensors it supports; tests and benchmarks call it directly.
#pragma once
#ifdef MEGATON_HAVE_CUDA
#include <torch/torch.h>

#include "ops/layer_norm.h"  // LayerNormMainGrads, HiddenDropout

namespace megaton::ops {

/// Whether the fused path handles these tensors: x on a CUDA device, fp32/bf16/fp16, weight and bias [h] of x's dtype
/// on x's device (or, for an fp32 x, both bf16 or both fp16: --fp32-residual-connection's mixed case, y in the
/// weight's dtype, kernels/layer_norm_mixed_kernels.h), 8 <= h <= 16384 with h % 8 == 0, x not empty, and x, when
/// contiguous, 16-byte aligned (a non-contiguous x is copied, which aligns it). Everything else stays on ATen's
/// torch::layer_norm.
bool fused_layer_norm_supported(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

/// x [.., h] -> [.., h] with autograd (gradients for x, weight and bias). Requires fused_layer_norm_supported.
/// main_grads: where dgamma / dbeta go instead of being returned (ops/layer_norm.h).
torch::Tensor fused_layer_norm(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                               double eps, const LayerNormMainGrads& main_grads = {});

/// The two halves without autograd. Forward: y [.., h] like x in the weight's dtype, mean and rstd [rows] fp32 (rows =
/// x.numel() / h). With `residual` (fused_add_layer_norm_supported): sum = x + residual (rounded as ATen's add; in fp32
/// for an fp32 residual and a 16-bit x) is normalised instead of x and returned too. With `dropout` (p > 0, a residual,
/// fused_dropout_add_layer_norm_supported): sum = dropout(x) + residual, the dropout drawn in the kernel
/// (kernels::ResidualDropout) and its keep bits returned.
struct FusedLayerNormOutput {
  torch::Tensor y, mean, rstd;
  torch::Tensor sum;   // [.., h] like x, with a residual only
  torch::Tensor keep;  // [rows * h / 8] uint8, bit e % 8 of byte e / 8: element e kept (with dropout only)
};
FusedLayerNormOutput fused_layer_norm_forward(const torch::Tensor& x, const torch::Tensor& weight,
                                              const torch::Tensor& bias, double eps,
                                              const torch::Tensor& residual = torch::Tensor(),
                                              const HiddenDropout& dropout = {});

/// Backward from the forward's mean and rstd: dx [.., h] like x, dweight [h], dbias [h] in the weight's dtype (dy's).
/// With `dresidual` (like x): dx + dresidual, summed before rounding. dweight / dbias undefined where they went into
/// main_grads (main_grad_takes_sums: fp32, contiguous, [h], on x's device). dx_branch, the gradient of the add's other
/// input where it is not dx itself: with the forward's `keep` bits and its dropout probability p > 0, dx * keep / (1 -
/// p) (the gradient of the dropout's input); for an fp32 x with a 16-bit weight and a `dresidual` (the mixed add),
/// dx rounded to the weight's dtype (through the keep bits with p > 0). Undefined otherwise.
struct FusedLayerNormGrads {
  torch::Tensor dx, dweight, dbias, dx_branch;
};
FusedLayerNormGrads fused_layer_norm_backward(const torch::Tensor& dy, const torch::Tensor& x,
                                              const torch::Tensor& weight, const torch::Tensor& mean,
                                              const torch::Tensor& rstd,
                                              const torch::Tensor& dresidual = torch::Tensor(),
                                              const LayerNormMainGrads& main_grads = {},
                                              const torch::Tensor& keep = torch::Tensor(), double dropout_p = 0.0);

/// The residual add fused into the LayerNorm that reads its result: sum = x + residual (rounded to x's dtype, as
/// ATen's add) and y = LayerNorm(sum), with autograd (the backward adds sum's own gradient into the LayerNorm's input
/// gradient in the same kernel). Requires fused_layer_norm_supported(x, weight, bias) and residual of x's shape, dtype
/// and device, or (mixed, --fp32-residual-connection) an fp32 residual with a 16-bit x of the weight's dtype: sum in
/// fp32 (x upcast exactly), y in the weight's dtype.
struct FusedAddLayerNormOutput {
  torch::Tensor sum, y;
};
bool fused_add_layer_norm_supported(const torch::Tensor& x, const torch::Tensor& residual, const torch::Tensor& weight,
                                    const torch::Tensor& bias);
/// Whether the fused add can also draw `dropout` on x (p in (0, 1), a CUDA generator on x's device, x bf16 or fp16),
/// given fused_add_layer_norm_supported.
bool fused_dropout_add_layer_norm_supported(const torch::Tensor& x, const HiddenDropout& dropout);
/// With `dropout` (p > 0; fused_dropout_add_layer_norm_supported): sum = dropout(x) + residual, drawn in the kernel;
/// the backward gives x the gradient through the same keep bits.
FusedAddLayerNormOutput fused_add_layer_norm(const torch::Tensor& x, const torch::Tensor& residual,
                                             const torch::Tensor& weight, const torch::Tensor& bias, double eps,
                                             const LayerNormMainGrads& main_grads = {},
                                             const HiddenDropout& dropout = {});

}  // namespace megaton::ops

#endif  // MEGATON_HAVE_CUDA
