#include "parallel/rng_tracker.h"

#include <mutex>

namespace megaton::parallel {

namespace {
at::Generator make_generator(torch::Device device, uint64_t seed) {
  at::Generator base = at::globalContext().defaultGenerator(device);
  at::Generator g;
  {
    std::lock_guard<std::mutex> lock(base.mutex());
    g = base.clone();
  }
  g.set_current_seed(seed);
  return g;
}
}  // namespace

RngTracker::RngTracker(uint64_t seed, int tp_rank, int pp_rank, torch::Device device)
    : default_(make_generator(device, default_seed(seed, pp_rank))),
      tp_(make_generator(device, tp_seed(seed, tp_rank, pp_rank))) {}

RngState RngTracker::get_state() const {
  return {default_.get_state(), tp_.get_state()};
}

void RngTracker::set_state(const RngState& s) {
  default_.set_state(s.default_state);
  tp_.set_state(s.tp_state);
}

torch::Tensor dropout(const torch::Tensor& x, double p, bool training, at::Generator& gen) {
  if (!training || p <= 0.0) return x;
  // CUDA: ATen's fused dropout, one kernel that writes the output and a byte mask, and one for the backward
  // (_masked_scale). The composite below writes a keep tensor the size of x and makes two more passes each way: at
  // the 1.3B shape ~2.2x the bytes per dropout (docs/gpu.md, thirteenth session). Its argument is the keep probability.
  if (x.is_cuda()) return std::get<0>(at::_fused_dropout(x, 1.0 - p, gen));
  torch::Tensor keep = torch::empty_like(x).bernoulli_(1.0 - p, gen);  // 1 with probability 1-p
  return x * keep * (1.0 / (1.0 - p));
}

}  // namespace megaton::parallel
