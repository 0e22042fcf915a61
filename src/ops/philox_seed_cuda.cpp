#include "ops/philox_seed_cuda.h"

#include <ATen/cuda/CUDAGeneratorImpl.h>

#include <mutex>
#include <type_traits>

#include "core/error.h"

namespace megaton::ops {

namespace {

// at::PhiloxCudaState's seed is a union of a value and a pointer (LibTorch 1.x, and again in later 2.x) or a plain
// value (early 2.x); its offset is such a union throughout.
template <typename State>
void take_seed(const State& s, kernels::PhiloxSeed& out) {
  if constexpr (std::is_integral_v<std::decay_t<decltype(s.seed_)>>) {
    out.seed = static_cast<uint64_t>(s.seed_);
  } else {
    if (s.captured_)
      out.seed_ptr = s.seed_.ptr;
    else
      out.seed = s.seed_.val;
  }
}

}  // namespace

kernels::PhiloxSeed philox_seed(at::Generator& generator, uint64_t increment) {
  MEGATON_CHECK(generator.defined() && generator.device().is_cuda(), InternalError,
                "philox_seed: not a CUDA generator");
  auto* impl = generator.get<at::CUDAGeneratorImpl>();
  at::PhiloxCudaState state;
  {
    const std::lock_guard<std::mutex> lock(generator.mutex());
    state = impl->philox_cuda_state(increment);
  }
  kernels::PhiloxSeed out;
  take_seed(state, out);
  if (state.captured_) {
    out.offset_ptr = state.offset_.ptr;
    out.offset_intragraph = static_cast<uint32_t>(state.offset_intragraph_);
  } else {
    out.offset = state.offset_.val;
  }
  return out;
}

}  // namespace megaton::ops
