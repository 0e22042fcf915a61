#include "ops/dropout.h"

namespace megaton::ops {

torch::Tensor dropout(const torch::Tensor& x, double p, at::Generator& gen) {
  if (p <= 0.0) return x;
  // CUDA: ATen's fused dropout, one kernel that writes the output and a byte mask, and one for the backward
  // (_masked_scale). The composite below writes a keep tensor the size of x and makes two more passes each way: at
  // the 1.3B shape ~2.2x the bytes per dropout. Its argument is the keep probability.
  if (x.is_cuda()) return std::get<0>(at::_fused_dropout(x, 1.0 - p, gen));
  torch::Tensor keep = torch::empty_like(x).bernoulli_(1.0 - p, gen);  // 1 with probability 1-p
  return x * keep * (1.0 / (1.0 - p));
}

}  // namespace megaton::ops
