// Linear layers whose elementwise neighbours ride in the GEMMs' epilogues (cuBLASLt, ops/cublaslt_gemm.h), with the
// same math as ATen's torch::linear / torch::gelu(.., "tanh"):
//
//   linear_bias_grad_fused  y = x w^T + b; backward: the bias gradient comes out of the weight-gradient GEMM
//                           (no separate reduction over the [T, out] gradient).
//   bias_gelu_mlp           y = gelu_tanh(x w1^T + b1) w2^T (+ b2): forward, GELU and its input come out of fc1's GEMM;
//                           backward, GELU's derivative and b1's gradient come out of fc2's input-gradient GEMM, and
//                           b2's gradient out of fc2's weight-gradient GEMM (Megatron's bias_gelu fusion, done in
//                           the GEMMs as Transformer Engine does).
//
// Taken for CUDA tensors of one dtype, bf16 or fp16, with feature sizes divisible by 8 (gemm_epilogue_supported);
// everything else, and shapes for which cuBLASLt has no algorithm, runs the same autograd function on ATen ops, which
// is also what the CPU tests check the gradients of.
#pragma once
#include <torch/torch.h>

namespace megaton::ops {

/// Whether the cuBLASLt path takes these tensors (all defined ones on one CUDA device, bf16 or fp16, one dtype, the
/// last dimension of each divisible by 8). CPU builds: always false.
bool gemm_epilogue_supported(std::initializer_list<torch::Tensor> tensors);

/// x [.., in], w [out, in], b [out] -> [.., out] = x w^T + b, with autograd.
torch::Tensor linear_bias_grad_fused(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b);

/// x [.., h], w1 [f, h], b1 [f], w2 [h, f], b2 [h] or undefined -> [.., h] = gelu_tanh(x w1^T + b1) w2^T (+ b2), with
/// autograd (gradients for x, w1, b1, w2 and b2).
torch::Tensor bias_gelu_mlp(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& b1,
                            const torch::Tensor& w2, const torch::Tensor& b2);

}  // namespace megaton::ops
