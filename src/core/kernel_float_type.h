// The kernels/ element type of a tensor, for the LibTorch wrappers of Megaton's CUDA kernels (src/**/*_cuda.cpp).
#pragma once
#include <torch/torch.h>

#include <optional>

#include "core/error.h"
#include "float_type.h"  // kernels/

namespace megaton {

/// fp32, bf16 or fp16 as kernels::FloatType; nothing for any other dtype.
inline std::optional<kernels::FloatType> try_kernel_float_type(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kFloat32:
      return kernels::FloatType::kFloat32;
    case torch::kBFloat16:
      return kernels::FloatType::kBFloat16;
    case torch::kFloat16:
      return kernels::FloatType::kFloat16;
    default:
      return std::nullopt;
  }
}

/// The same, or InternalError("WHAT: unsupported dtype D (expected fp32, bf16 or fp16)"): for wrappers whose callers
/// checked the dtype already.
inline kernels::FloatType kernel_float_type(const torch::Tensor& t, const char* what) {
  const auto type = try_kernel_float_type(t);
  if (!type)
    throw InternalError(
        str(what, ": unsupported dtype ", c10::toString(t.scalar_type()), " (expected fp32, bf16 or fp16)"));
  return *type;
}

}  // namespace megaton
