// The one place where LibTorch version differences live: Debian's CPU LibTorch 1.13 here, torch 2.11 (CUDA) on the
// GPU machine. Code elsewhere calls these helpers instead of testing TORCH_VERSION_* itself.
#pragma once
#include <torch/torch.h>
#include <torch/version.h>

#define MEGATON_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace megaton::compat {

/// True when this LibTorch was built with CUDA and a device is visible.
inline bool cuda_available() { return torch::cuda::is_available(); }

/// "1.13.1" / "2.11.0".
inline const char* torch_version() { return TORCH_VERSION; }

/// Fused scaled-dot-product attention exists in ATen from 2.0 on; before that, callers use the explicit softmax path.
constexpr bool kHasSdpa = MEGATON_TORCH_AT_LEAST(2, 0);

/// Element size in bytes of a scalar type (c10::elementSize is spelled differently across versions).
inline size_t element_size(c10::ScalarType t) { return c10::elementSize(t); }

}  // namespace megaton::compat
