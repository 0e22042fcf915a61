// The attention's query, key and value from the QKV projection's output, with autograd: q, k, v are views of qkv [s, b,
// np, 3, d] (Megatron's interleaved layout), and the backward puts their three gradients back into one [s, b, np, 3, d]
// gradient (what unbind's backward does with a stack) and, given the projection's bias, also returns the bias gradient,
// the column sums of that gradient. On CUDA bf16/fp16 one kernel does both (ops::qkv_interleave_bias_grad_fused: the
// [tokens, 3h] gradient is written once and not read again for the sum); elsewhere torch::stack and ops::bias_grad.
//
// Contract: qkv must already hold the bias, added outside autograd (ColumnParallelLinear::forward_bias_grad_elsewhere
// adds bias.detach()), so the bias gets its gradient from here and from nowhere else.
#pragma once
#include <torch/torch.h>

#include <array>

#include "ops/linear.h"  // MainGrad

namespace megaton::ops {

/// qkv [s, b, np, 3, d]; bias [np 3 d] (the projection's local bias, requiring grad) or undefined -> {q, k, v}, each
/// [s, b, np, d]. bias_main_grad: the bias's fp32 main grad, into which the bias gradient goes where the column-sum
/// kernels take it (ops::bias_grad), or undefined.
std::array<torch::Tensor, 3> split_qkv(const torch::Tensor& qkv, const torch::Tensor& bias,
                                       const MainGrad& bias_main_grad = {});

}  // namespace megaton::ops
