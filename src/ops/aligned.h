// 16-byte alignment for the CUDA kernel wrappers of src/ops/ (the kernels load and store 16-byte vectors).
#pragma once
#include <torch/torch.h>

#include <cstdint>

namespace megaton::ops {

/// Whether t's data starts on a 16-byte boundary.
inline bool aligned16(const torch::Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
}

/// t itself when contiguous and 16-byte aligned, else a contiguous copy (fresh allocations are aligned).
inline torch::Tensor aligned_contiguous(const torch::Tensor& t) {
  torch::Tensor c = t.contiguous();
  return aligned16(c) ? c : c.clone();
}

}  // namespace megaton::ops
