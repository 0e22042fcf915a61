// The four tensor-parallel autograd mappings (Megatron's mpu/mappings.py), over any dist::Communicator (MPI on CPU
// tensors, NCCL on CUDA tensors). Each pairs a forward collective with its adjoint in backward:
//
//   copy_to_tp_region      identity            | all-reduce (sum)      — input of a column-parallel layer
//   reduce_from_tp_region  all-reduce (sum)    | identity              — output of a row-parallel layer
//   scatter_to_tp_region   keep own last-dim   | all-gather last dim   — input of a row-parallel layer (not parallel)
//   gather_from_tp_region  all-gather last dim | keep own last-dim     — output of a column-parallel layer (gathered)
//
// With a one-rank group every mapping returns its input unchanged (no autograd node).
#pragma once
#include <torch/torch.h>

#include "dist/communicator.h"

namespace megaton::parallel {

torch::Tensor copy_to_tp_region(const torch::Tensor& x, const dist::CommunicatorPtr& tp);
torch::Tensor reduce_from_tp_region(const torch::Tensor& x, const dist::CommunicatorPtr& tp);
/// [..., n] -> [..., n/tp]: this rank's slice of the last dimension (n must be divisible by the group size).
torch::Tensor scatter_to_tp_region(const torch::Tensor& x, const dist::CommunicatorPtr& tp);
/// [..., n/tp] -> [..., n]: the ranks' slices concatenated along the last dimension, in group-rank order.
torch::Tensor gather_from_tp_region(const torch::Tensor& x, const dist::CommunicatorPtr& tp);

// The collectives themselves, without autograd (used by the mappings, the cross-entropy and tests).
/// Sum over the group, returning a new contiguous tensor.
torch::Tensor all_reduce_sum(const torch::Tensor& x, dist::Communicator& c);
/// [..., n/size] -> [..., n] concatenated along the last dimension.
torch::Tensor all_gather_last_dim(const torch::Tensor& x, dist::Communicator& c);
/// [..., n] -> [..., n/size], this rank's slice (contiguous copy).
torch::Tensor split_last_dim(const torch::Tensor& x, const dist::Communicator& c);

}  // namespace megaton::parallel
