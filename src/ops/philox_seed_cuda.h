// The Philox seed and offset a kernel of ours draws from a CUDA generator, taken as ATen's own kernels take theirs
// (CUDAGeneratorImpl::philox_cuda_state under the generator's lock): CUDA-graph safe, the generator advanced by the
// words each subsequence uses. CUDA builds only.
#pragma once
#ifdef MEGATON_HAVE_CUDA
#include <ATen/core/Generator.h>

#include <cstdint>

#include "philox_seed.h"  // kernels/

namespace megaton::ops {

/// Reserves `increment` 32-bit words of every Philox subsequence of `generator` (a CUDA generator) for one kernel
/// launch and returns where they start. Throws InternalError for a generator that is not a CUDA one.
kernels::PhiloxSeed philox_seed(at::Generator& generator, uint64_t increment);

}  // namespace megaton::ops
#endif  // MEGATON_HAVE_CUDA
