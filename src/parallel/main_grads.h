// Where each parameter's fp32 main gradient lives once DataParallel has moved the parameters into its flat buffer:
// the layers that write weight gradients straight into it (gradient accumulation fusion, Megatron-LM's
// --gradient-accumulation-fusion: the weight-gradient GEMM accumulates into the fp32 main grad, so no model-dtype
// gradient is written, read back and added) ask here in their forward. Shared by a model chunk's ParamFactory and its
// layers; empty (nothing fused) until the trainer binds DataParallel's buffers.
#pragma once
#include <torch/torch.h>

#include <memory>

namespace megaton::parallel {

class MainGrads {
 public:
  /// params [N]: the flat buffer holding the parameters' storage; grads [N] fp32: their main grads, same offsets.
  void bind(const torch::Tensor& params, const torch::Tensor& grads);
  /// `param`'s main grad (fp32, param's shape, a view into the grads buffer), or undefined when nothing is bound or
  /// param does not live in the bound buffer.
  torch::Tensor of(const torch::Tensor& param) const;

 private:
  torch::Tensor params_, grads_;
};

using MainGradsPtr = std::shared_ptr<MainGrads>;

}  // namespace megaton::parallel
