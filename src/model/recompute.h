// Activation recomputation (--checkpoint-activations; Megatron's CheckpointFunction): the forward runs without
// keeping intermediate activations, saving only the input and the dropout RNG state; backward restores that state,
// reruns the forward with autograd on, and backpropagates through it, so gradients (parameters included) are
// exactly those of the plain forward.
#pragma once
#include <torch/torch.h>

#include <functional>

#include "parallel/rng_tracker.h"

namespace megaton::model {

using HiddenFn = std::function<torch::Tensor(const torch::Tensor&)>;

/// fn(x) with recomputation in backward. x must require grad (else there is nothing to recompute for and fn runs
/// plainly). `rng` is the tracker fn draws its dropout masks from.
torch::Tensor checkpointed(const HiddenFn& fn, const torch::Tensor& x, parallel::RngTracker& rng);

}  // namespace megaton::model
