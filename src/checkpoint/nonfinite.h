// Counting NaN and inf in a checkpoint's tensors. On the host, a pass over the bits (an all-ones exponent) instead of
// torch::isfinite(t).sum(), which allocates a boolean tensor as large as t (its pages faulted in and zeroed) and was a
// third of a save's CPU time; on a device, torch's kernels.
#pragma once
#include <torch/torch.h>

#include <cstdint>

namespace megaton::checkpoint {

/// Elements of `t` that are NaN or +-inf (0 for integer tensors).
int64_t count_nonfinite(const torch::Tensor& t);

}  // namespace megaton::checkpoint
