// The transformer MLP with bias + tanh GELU as one autograd function (Megatron's bias-GeLU fusion), the same math as
// torch::linear -> torch::gelu(.., "tanh") -> torch::linear:
//
//   bias_gelu_mlp  y = gelu_tanh(x w1^T + b1) w2^T (+ b2). Forward: with `forward`, GELU and its input come out of
//                  fc1's GEMM (cuBLASLt epilogue GELU_AUX_BIAS, 1.10-1.15x ATen's GEMM + GELU on an H200), else ATen's
//                  linear + gelu. Backward: ATen's GEMMs; GELU backward and fc1's bias gradient in one kernel
//                  (ops/gelu_bias_grad.h), or with `backward` the GELU derivative in fc2's input-gradient GEMM
//                  (cuBLASLt epilogue DGELU: d_pre without writing and re-reading dy w2) and the bias gradient by the
//                  column-sum kernel. (The DGELU_BGRAD and BGRADB epilogues, which also take the bias gradients,
//                  measured 0.53x and 0.96x: perf/bench_gemm_epilogue.cpp.)
//
// TransformerLayer takes it for every tanh-GELU MLP with an fc1 bias, both epilogues by default
// (--no-gemm-epilogue-fusion turns both off, --no-gemm-dgelu-epilogue the backward one), for CUDA tensors of one
// dtype, bf16 or fp16, with feature sizes divisible by 8 (gemm_epilogue_supported). Otherwise, and for shapes cuBLASLt
// has no algorithm for, the same function runs on ATen ops, which is also what the CPU tests check the gradients of.
#pragma once
#include <torch/torch.h>

#include "ops/gemm_algo_memo.h"
#include "ops/linear.h"

namespace megaton::ops {

/// Whether the cuBLASLt path takes these tensors (all defined ones on one CUDA device, bf16 or fp16, one dtype, the
/// last dimension of each divisible by 8). CPU builds: always false.
bool gemm_epilogue_supported(std::initializer_list<torch::Tensor> tensors);

/// Which of the MLP's GEMMs take a cuBLASLt epilogue (where gemm_epilogue_supported; else ATen's ops).
struct MlpEpilogues {
  bool forward = false;          // fc1 + bias + GELU: GELU_AUX_BIAS
  bool backward = false;         // fc2's input gradient times the GELU derivative: DGELU
  GemmAlgoMemo* memo = nullptr;  // the caller's memo of cuBLASLt's algorithms (must outlive the backward), or none
};

/// x [.., h], w1 [f, h], b1 [f], w2 [h, f], b2 [h] or undefined -> [.., h] = gelu_tanh(x w1^T + b1) w2^T (+ b2), with
/// autograd (gradients for x, w1, b1, w2 and b2), through the epilogues asked for. w1_main_grad, w2_main_grad:
/// undefined, or the weights' fp32 main grads, into which the backward then adds (or first writes) their gradients
/// (ops/linear.h) instead of returning them; b1_main_grad, b2_main_grad likewise for the biases, where the column-sum
/// kernels take them (ops::bias_grad).
torch::Tensor bias_gelu_mlp(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& b1,
                            const torch::Tensor& w2, const torch::Tensor& b2, MlpEpilogues epilogues,
                            const MainGrad& w1_main_grad = {}, const MainGrad& w2_main_grad = {},
                            const MainGrad& b1_main_grad = {}, const MainGrad& b2_main_grad = {});

}  // namespace megaton::ops
