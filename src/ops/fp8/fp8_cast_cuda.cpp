#include <c10/cuda/CUDAStream.h>

#include "core/error.h"
#include "core/kernel_float_type.h"
#include "fp8_cast_kernels.h"  // kernels/
#include "ops/fp8/fp8_cast.h"

namespace megaton::ops::fp8 {

Fp8Matrix cast_to_fp8(const torch::Tensor& x, const torch::Tensor& scale, Format format, bool transpose,
                      const torch::Tensor& amax) {
  MEGATON_ASSERT(x.dim() == 2 && x.is_contiguous() && x.is_cuda(), "cast_to_fp8: x ", x.sizes(), " on ", x.device());
  MEGATON_ASSERT(scale.numel() == 1 && scale.scalar_type() == torch::kFloat32 && scale.device() == x.device(),
                 "cast_to_fp8: scale must be fp32 [1] on ", x.device());
  MEGATON_ASSERT(!amax.defined() || (amax.numel() == 1 && amax.scalar_type() == torch::kFloat32 &&
                                     amax.device() == x.device() && amax.is_contiguous()),
                 "cast_to_fp8: amax must be fp32 [1] on ", x.device());
  const int64_t rows = x.size(0), cols = x.size(1);
  const auto bytes = x.options().dtype(torch::kUInt8);
  Fp8Matrix m;
  m.format = format;
  m.bytes = torch::empty({rows, cols}, bytes);
  if (transpose) m.bytes_t = torch::empty({cols, rows}, bytes);
  m.scale_inv = scale.reciprocal();
  kernels::cast_to_fp8(x.data_ptr(), kernel_float_type(x, "cast_to_fp8"), rows, cols, scale.data_ptr<float>(),
                       format == Format::kE4M3 ? kernels::Fp8Type::kE4M3 : kernels::Fp8Type::kE5M2,
                       m.bytes.data_ptr<uint8_t>(), transpose ? m.bytes_t.data_ptr<uint8_t>() : nullptr,
                       amax.defined() ? amax.data_ptr<float>() : nullptr,
                       c10::cuda::getCurrentCUDAStream(x.device().index()).stream());
  return m;
}

}  // namespace megaton::ops::fp8
