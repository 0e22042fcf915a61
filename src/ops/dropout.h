// Inverted dropout drawn from an explicit generator (the model's RNG streams, parallel/rng_tracker.h): on CUDA ATen's
// fused kernel (the output and a byte mask in one pass, the backward one more), on the CPU a composite.
#pragma once
#include <torch/torch.h>

namespace megaton::ops {

/// x * keep / (1 - p), keep ~ Bernoulli(1 - p) per element from `gen` (x's device); x itself when p <= 0. The CUDA
/// and CPU paths draw their masks differently from the same generator state.
torch::Tensor dropout(const torch::Tensor& x, double p, at::Generator& gen);

}  // namespace megaton::ops
