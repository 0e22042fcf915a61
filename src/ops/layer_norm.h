// LayerNorm as Megatron's MixedFusedLayerNorm computes it: statistics and affine in fp32, output in the input dtype.
// On CUDA, torch's layer_norm already accumulates half inputs in fp32; on the CPU half inputs are upcast explicitly.
// In a CUDA build, CUDA tensors that the fused kernels support (ops/layer_norm_cuda.h: x, weight and bias of one
// dtype, or an fp32 x with 16-bit weight and bias; 8 <= h <= 16384, h % 8 == 0) take kernels/layer_norm_kernels.cu or
// kernels/layer_norm_mixed_kernels.cu instead of ATen.
#pragma once
#include <torch/torch.h>

#include "ops/linear.h"  // MainGrad

namespace megaton::ops {

/// The fp32 main grads of a LayerNorm's weight and bias (gradient accumulation fusion): on the fused CUDA path the
/// backward adds dgamma and dbeta straight into them (in fp32, no model-dtype gradient; parallel/main_grads.h); ATen's
/// path leaves them alone and returns the gradients. Undefined members: returned as gradients.
struct LayerNormMainGrads {
  MainGrad weight, bias;
};

/// x [.., h], weight/bias [h] -> [.., h] in x's dtype; an fp32 x with 16-bit weight and bias (an fp32 residual stream,
/// --fp32-residual-connection) gives the weight's dtype, as Megatron's mixed-precision LayerNorm. `use_fused = false`
/// forces ATen's torch::layer_norm (tests and benchmarks compare the two); CPU tensors take ATen.
torch::Tensor layer_norm(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, double eps,
                         bool use_fused = true, const LayerNormMainGrads& main_grads = {});

/// Megatron's hidden dropout on the branch that joins the residual stream: add_layer_norm's x is dropped out before
/// the add, with draws from `generator` (x's device). `fused`: where the fused LayerNorm takes the add (CUDA, bf16 or
/// fp16) the draws run inside its kernels (kernels::ResidualDropout: no dropout pass of its own, one bit of mask per
/// element kept for the backward; the default, --no-dropout-layernorm-fusion turns it off); otherwise, and always when
/// `fused` is false, ops::dropout runs first. The two draw different masks from the same generator state.
struct HiddenDropout {
  double p = 0.0;  // 0: none
  at::Generator* generator = nullptr;
  bool fused = false;
};

/// The residual add and the LayerNorm after it: sum = x + residual, y = layer_norm(sum). On CUDA tensors the fused
/// kernel takes, one kernel each way (ops/layer_norm_cuda.h); otherwise x + residual and layer_norm above. With
/// `dropout` (p > 0): sum = dropout(x) + residual. A 16-bit x on an fp32 residual gives an fp32 sum and a y in the
/// weight's dtype (in the mixed kernels on CUDA, ATen's ops elsewhere).
struct AddLayerNorm {
  torch::Tensor sum, y;  // [.., h] each
};
AddLayerNorm add_layer_norm(const torch::Tensor& x, const torch::Tensor& residual, const torch::Tensor& weight,
                            const torch::Tensor& bias, double eps, bool use_fused = true,
                            const LayerNormMainGrads& main_grads = {}, const HiddenDropout& dropout = {});

}  // namespace megaton::ops
