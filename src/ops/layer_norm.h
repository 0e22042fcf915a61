// LayerNorm as Megatron's MixedFusedLayerNorm computes it: statistics and affine in fp32, output in the input dtype.
// On CUDA, torch's layer_norm already accumulates half inputs in fp32; on the CPU half inputs are upcast explicitly.
#pragma once
#include <torch/torch.h>

namespace megaton::ops {

/// x [.., h], weight/bias [h] -> [.., h] in x's dtype.
torch::Tensor layer_norm(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, double eps);

}  // namespace megaton::ops
