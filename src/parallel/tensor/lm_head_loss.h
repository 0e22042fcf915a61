// The LM head and its cross-entropy as one autograd op, the gradient of the logits computed in the forward pass.
// Apart, the logits [T, V/tp] are written by the head's GEMM, read by the loss's forward, and read and written again by
// its backward (the gradient, a second buffer of that size) before the head's backward GEMMs read it. Here the loss's
// forward overwrites the logits with softmax - one_hot(target), the gradient for a loss gradient of 1 (with TP = 1 in
// one pass over them, kernels::cross_entropy_loss_grad), and the backward applies the per-token loss gradient g
// [T] in the head's GEMMs, on their small operands:
//   d_hidden = g * (G W)   [T, h]         d_weight = G^T (g * hidden)   [V/tp, h]
// one pass over [T, V/tp] less, and no second buffer of that size. The same losses as vocab_parallel_cross_entropy
// over parallel_lm_logits; the gradients differ from theirs by rounding (G in the logits' dtype before the scale).
#pragma once
#include <torch/torch.h>

#include "dist/communicator.h"
#include "ops/linear.h"  // MainGrad

namespace megaton::parallel {

/// hidden [s, b, h] (already through copy_to_tp_region), weight [V/tp, h] of hidden's dtype, target [s, b] global
/// vocabulary ids -> per-token loss [s, b] fp32 (fp64 for fp64 hidden), with autograd for hidden and weight.
/// valid_columns as vocab_parallel_cross_entropy's; use_fused = false keeps the loss's part on ATen (tests).
/// weight_main_grad: the weight's fp32 main grad (gradient accumulation fusion), into which d_weight's GEMM then adds
/// (or first writes, ops::weight_grad) instead of returning a [V/tp, h] gradient for DataParallel's hook to add.
torch::Tensor lm_head_cross_entropy(const torch::Tensor& hidden, const torch::Tensor& weight,
                                    const torch::Tensor& target, const dist::CommunicatorPtr& tp,
                                    int64_t valid_columns = -1, bool use_fused = true,
                                    const ops::MainGrad& weight_main_grad = {});

}  // namespace megaton::parallel
