// set_gemm_sm_carveout without CUDA: nothing to limit.
#ifndef MEGATON_HAVE_CUDA
#include "ops/gemm_sm_carveout.h"

namespace megaton::ops {

void set_gemm_sm_carveout(const torch::Device&, int) {}

int gemm_sm_target(const torch::Device&) {
  return 0;
}

}  // namespace megaton::ops
#endif
