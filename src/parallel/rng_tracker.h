// Dropout randomness with Megatron's model-parallel RNG semantics (mpu/random.py), held by the model instead of
// torch's global generators:
//   default stream  seed + 100*pp_rank            the same on every TP rank: dropout outside TP regions (embedding,
//                                                  residual/hidden dropout) must agree across the ranks of a layer;
//   TP stream       seed + 100*pp_rank + 2718 + tp_rank   different per TP rank: attention dropout on each rank's
//                                                  heads (the "model-parallel-rng" tracker state).
// Both are device generators (CPU or CUDA), so a run is deterministic for a seed. States can be saved and restored
// (activation recomputation replays the same masks; checkpoints store them).
#pragma once
#include <torch/torch.h>

namespace megaton::parallel {

struct RngState {
  torch::Tensor default_state;
  torch::Tensor tp_state;
};

class RngTracker {
 public:
  RngTracker(uint64_t seed, int tp_rank, int pp_rank, torch::Device device);

  at::Generator& default_generator() { return default_; }
  at::Generator& tp_generator() { return tp_; }

  RngState get_state() const;
  void set_state(const RngState& s);

  /// Megatron's seeds, for documentation and tests.
  static uint64_t default_seed(uint64_t seed, int pp_rank) { return seed + 100ull * pp_rank; }
  static uint64_t tp_seed(uint64_t seed, int tp_rank, int pp_rank) {
    return default_seed(seed, pp_rank) + 2718ull + tp_rank;
  }

 private:
  at::Generator default_;
  at::Generator tp_;
};

/// Inverted dropout with an explicit generator: x * bernoulli(1-p) / (1-p) (ops::dropout). The identity when
/// !training or p == 0. The CUDA and CPU paths draw their masks differently from the same generator state: masks agree
/// across ranks of one device type only.
torch::Tensor dropout(const torch::Tensor& x, double p, bool training, at::Generator& gen);

}  // namespace megaton::parallel
