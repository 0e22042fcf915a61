// Cross-entropy over vocabulary-parallel logits (Megatron's mpu/cross_entropy.py): each TP rank holds the logits of
// its vocabulary slice; the max, the target's logit and the sum of exponentials are combined with three
// all-reduces, so the full [s, b, V] logits are never gathered. Computed in fp32 (fp64 for fp64 logits).
#pragma once
#include <torch/torch.h>

#include "dist/communicator.h"

namespace megaton::parallel {

/// logits [s, b, V/tp] (any float dtype; upcast to fp32), target [s, b] int64 global vocabulary ids
/// -> per-token loss [s, b] fp32: log(sum_v exp(l_v)) - l_target. Backward: softmax - one_hot(target).
torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& logits, const torch::Tensor& target,
                                           const dist::CommunicatorPtr& tp);

}  // namespace megaton::parallel
