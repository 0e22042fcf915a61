// Cross-entropy over vocabulary-parallel logits (Megatron's mpu/cross_entropy.py): each TP rank holds the logits of
// its vocabulary slice; the max, the target's logit and the sum of exponentials are combined with three
// all-reduces, so the full [s, b, V] logits are never gathered. Computed in fp32 (fp64 for fp64 logits).
#pragma once
#include <torch/torch.h>

#include "dist/communicator.h"

namespace megaton::parallel {

/// logits [s, b, V/tp] (any float dtype; upcast to fp32), target [s, b] int64 global vocabulary ids
/// -> per-token loss [s, b] fp32: log(sum_v exp(l_v)) - l_target. Backward: softmax - one_hot(target).
/// valid_columns: this rank's columns [0, valid_columns) are real vocabulary, the rest padding that counts as -inf
/// (-1: every column is real). CUDA logits (fp32/bf16/fp16) in a CUDA build take the fused kernels
/// (kernels/cross_entropy_kernels.h); otherwise the unfused ATen path. `use_fused = false` forces the ATen path (tests
/// and benchmarks compare the two).
torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& logits, const torch::Tensor& target,
                                           const dist::CommunicatorPtr& tp, int64_t valid_columns = -1,
                                           bool use_fused = true);

/// The loss and its gradient at once, for a caller that applies the loss gradient itself (lm_head_loss.h): per-token
/// loss [rows] fp32 (fp64 for fp64 logits) of logits [rows, V/tp] (contiguous), which are overwritten with the loss's
/// gradient for a loss gradient of 1: softmax - one_hot(target), 0 on padding columns, in the logits' dtype.
/// target [rows] int64 global ids. CUDA fp32/bf16/fp16 logits take the kernels (with TP = 1 one pass over the logits,
/// kernels::cross_entropy_loss_grad) unless use_fused is false; otherwise ATen.
torch::Tensor cross_entropy_loss_grad_(torch::Tensor& logits, const torch::Tensor& target,
                                       const dist::CommunicatorPtr& tp, int64_t valid_columns = -1,
                                       bool use_fused = true);

#ifdef MEGATON_HAVE_CUDA
/// cross_entropy_loss_grad_'s kernel path (cross_entropy_cuda.cpp).
torch::Tensor fused_cross_entropy_loss_grad_(torch::Tensor& logits, const torch::Tensor& target,
                                             const dist::CommunicatorPtr& tp, int64_t valid_columns);

/// out = x * scale (row r of x [rows, cols] times scale[r]; out may be x) by kernels::scale_rows, ATen's
/// `mul_out(out, x, scale)` bit for bit; false (nothing done) unless x and out are contiguous CUDA fp32/bf16/fp16
/// tensors of one shape and dtype and scale is a contiguous fp32 [rows, 1] or [rows] on the same device.
bool scale_rows_cuda(const torch::Tensor& x, const torch::Tensor& scale, torch::Tensor& out);

/// The fused CUDA path (cross_entropy_cuda.cpp): same result, one read of the logits forward, one read + one write
/// backward, nothing of size [s, b, V/tp] saved but the logits themselves.
torch::Tensor fused_vocab_parallel_cross_entropy(const torch::Tensor& logits, const torch::Tensor& target,
                                                 const dist::CommunicatorPtr& tp, int64_t valid_columns);
#endif

}  // namespace megaton::parallel
