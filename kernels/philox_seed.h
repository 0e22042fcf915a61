// A Philox4x32-10 key and counter offset as ATen's CUDA generator hands them to a kernel (at::PhiloxCudaState), named
// without torch headers so that kernels/ can take it: plain values, or, while a CUDA graph is captured, pointers that
// each replay of the graph fills plus an offset within the graph (at::cuda::philox::unpack's two cases).
#pragma once
#include <cstdint>

namespace megaton::kernels {

struct PhiloxSeed {
  uint64_t seed = 0, offset = 0;
  const int64_t* seed_ptr = nullptr;    // when set: seed = *seed_ptr (when offset_ptr is set and seed_ptr is not: seed)
  const int64_t* offset_ptr = nullptr;  // when set: offset = *offset_ptr + offset_intragraph
  uint32_t offset_intragraph = 0;
};

}  // namespace megaton::kernels
