#include "parallel/rng_tracker.h"

#include <mutex>

#include "ops/dropout.h"

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
  return training ? ops::dropout(x, p, gen) : x;
}

}  // namespace megaton::parallel
