// The transformer MLP with bias + tanh GELU as one autograd function (Megatron's bias-GeLU fusion), the same math as
// torch::linear -> torch::gelu(.., "tanh") -> torch::linear:
//
//   bias_gelu_mlp  y = gelu_tanh(x w1^T + b1) w2^T (+ b2). Forward: with `gemm_epilogue`, GELU and its input come out
//                  of fc1's GEMM (cuBLASLt epilogue GELU_AUX_BIAS, 1.10-1.15x ATen's GEMM + GELU on an H200), else
//                  ATen's linear + gelu. Backward: ATen's GEMMs; GELU backward and fc1's bias gradient in one kernel
//                  (ops/gelu_bias_grad.h; the DGELU_BGRAD and BGRADB epilogues measured slower,
//                  perf/bench_gemm_epilogue.cpp).
//
// TransformerLayer takes it for every tanh-GELU MLP with an fc1 bias; the epilogue with --gemm-epilogue-fusion (off by
// default: 124M measured 1.2% faster, 1.3B not yet) for CUDA tensors of one dtype, bf16 or fp16, with feature sizes
// divisible by 8 (gemm_epilogue_supported). Otherwise, and for shapes cuBLASLt has no algorithm for, the same
// function runs on ATen ops, which is also what the CPU tests check the gradients of.
#pragma once
#include <torch/torch.h>

#include "ops/linear.h"

namespace megaton::ops {

/// Whether the cuBLASLt path takes these tensors (all defined ones on one CUDA device, bf16 or fp16, one dtype, the
/// last dimension of each divisible by 8). CPU builds: always false.
bool gemm_epilogue_supported(std::initializer_list<torch::Tensor> tensors);

/// x [.., h], w1 [f, h], b1 [f], w2 [h, f], b2 [h] or undefined -> [.., h] = gelu_tanh(x w1^T + b1) w2^T (+ b2), with
/// autograd (gradients for x, w1, b1, w2 and b2). gemm_epilogue: fc1's forward in cuBLASLt's GELU_AUX_BIAS epilogue
/// where gemm_epilogue_supported. w1_main_grad, w2_main_grad: undefined, or the weights' fp32 main grads, into which
/// the backward then adds (or first writes) their gradients (ops/linear.h) instead of returning them.
torch::Tensor bias_gelu_mlp(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& b1,
                            const torch::Tensor& w2, const torch::Tensor& b2, bool gemm_epilogue,
                            const MainGrad& w1_main_grad = {}, const MainGrad& w2_main_grad = {});

}  // namespace megaton::ops
