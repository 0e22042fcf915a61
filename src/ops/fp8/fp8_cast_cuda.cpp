#include <c10/cuda/CUDAStream.h>

#include "core/error.h"
#include "core/kernel_float_type.h"
#include "fp8_cast_dbias_kernels.h"  // kernels/
#include "fp8_cast_kernels.h"        // kernels/
#include "ops/aligned.h"
#include "ops/fp8/fp8_cast.h"

namespace megaton::ops::fp8 {

namespace {

kernels::Fp8Type kernel_type(Format f) {
  return f == Format::kE4M3 ? kernels::Fp8Type::kE4M3 : kernels::Fp8Type::kE5M2;
}

void check_scale_and_amax(const torch::Tensor& x, const torch::Tensor& scale, const torch::Tensor& amax) {
  MEGATON_ASSERT(scale.numel() == 1 && scale.scalar_type() == torch::kFloat32 && scale.device() == x.device(),
                 "cast_to_fp8: scale must be fp32 [1] on ", x.device());
  MEGATON_ASSERT(!amax.defined() || (amax.numel() == 1 && amax.scalar_type() == torch::kFloat32 &&
                                     amax.device() == x.device() && amax.is_contiguous()),
                 "cast_to_fp8: amax must be fp32 [1] on ", x.device());
}

}  // namespace

Fp8Matrix new_fp8_matrix(int64_t rows, int64_t cols, const torch::Device& device, const torch::Tensor& scale,
                         Format format, bool transpose) {
  const auto bytes = torch::TensorOptions().device(device).dtype(torch::kUInt8);
  Fp8Matrix m;
  m.format = format;
  m.bytes = torch::empty({rows, cols}, bytes);
  if (transpose) m.bytes_t = torch::empty({cols, rows}, bytes);
  m.scale_inv = scale.reciprocal();
  return m;
}

Fp8Matrix cast_to_fp8(const torch::Tensor& x, const torch::Tensor& scale, Format format, bool transpose,
                      const torch::Tensor& amax) {
  MEGATON_ASSERT(x.dim() == 2 && x.is_contiguous() && x.is_cuda(), "cast_to_fp8: x ", x.sizes(), " on ", x.device());
  check_scale_and_amax(x, scale, amax);
  const int64_t rows = x.size(0), cols = x.size(1);
  Fp8Matrix m = new_fp8_matrix(rows, cols, x.device(), scale, format, transpose);
  kernels::cast_to_fp8(
      x.data_ptr(), kernel_float_type(x, "cast_to_fp8"), rows, cols, scale.data_ptr<float>(), kernel_type(format),
      m.bytes.data_ptr<uint8_t>(), transpose ? m.bytes_t.data_ptr<uint8_t>() : nullptr,
      amax.defined() ? amax.data_ptr<float>() : nullptr, c10::cuda::getCurrentCUDAStream(x.device().index()).stream());
  return m;
}

torch::Tensor transpose_fp8(const torch::Tensor& bytes) {
  MEGATON_ASSERT(bytes.dim() == 2 && bytes.is_contiguous() && bytes.is_cuda() && bytes.scalar_type() == torch::kUInt8,
                 "transpose_fp8: bytes ", bytes.sizes(), " on ", bytes.device());
  torch::Tensor t = torch::empty({bytes.size(1), bytes.size(0)}, bytes.options());  // [c, r]
  kernels::transpose_fp8(bytes.data_ptr<uint8_t>(), bytes.size(0), bytes.size(1), t.data_ptr<uint8_t>(),
                         c10::cuda::getCurrentCUDAStream(bytes.device().index()).stream());
  return t;
}

bool cast_to_fp8_dbias_supported(const torch::Tensor& dy, const torch::Tensor& gelu_pre) {
  const auto t = dy.scalar_type();
  if (!dy.is_cuda() || (t != torch::kBFloat16 && t != torch::kFloat16) || dy.dim() != 2 || !dy.is_contiguous() ||
      !aligned16(dy) || !kernels::cast_to_fp8_dbias_takes(dy.size(0), dy.size(1)))
    return false;
  return !gelu_pre.defined() || (gelu_pre.device() == dy.device() && gelu_pre.scalar_type() == t &&
                                 gelu_pre.sizes() == dy.sizes() && gelu_pre.is_contiguous() && aligned16(gelu_pre));
}

Fp8Matrix cast_to_fp8_dbias(const torch::Tensor& dy, const torch::Tensor& gelu_pre, const torch::Tensor& scale,
                            Format format, const torch::Tensor& amax, bool want_db, const MainGrad& main,
                            torch::Tensor& db) {
  MEGATON_ASSERT(cast_to_fp8_dbias_supported(dy, gelu_pre), "cast_to_fp8_dbias: dy ", dy.sizes(), " ",
                 c10::toString(dy.scalar_type()), " on ", dy.device());
  check_scale_and_amax(dy, scale, amax);
  const int64_t rows = dy.size(0), cols = dy.size(1);
  Fp8Matrix m = new_fp8_matrix(rows, cols, dy.device(), scale, format, true);
  const torch::Tensor amax_out = amax.defined() ? amax : torch::zeros({1}, dy.options().dtype(torch::kFloat32));
  db = torch::Tensor();
  const kernels::ColumnSumOut sums = want_db ? column_sum_out(main, cols, dy.options(), db) : kernels::ColumnSumOut();
  const int64_t partials = kernels::cast_to_fp8_dbias_partials(rows, cols);
  torch::Tensor workspace;  // [partials, cols] fp32
  if (want_db) workspace = torch::empty({partials, cols}, dy.options().dtype(torch::kFloat32));
  try {
    kernels::cast_to_fp8_dbias(dy.data_ptr(), gelu_pre.defined() ? gelu_pre.data_ptr() : nullptr,
                               kernel_float_type(dy, "cast_to_fp8_dbias"), rows, cols, scale.data_ptr<float>(),
                               kernel_type(format), m.bytes.data_ptr<uint8_t>(), m.bytes_t.data_ptr<uint8_t>(),
                               amax_out.data_ptr<float>(), sums, want_db ? workspace.data_ptr<float>() : nullptr,
                               partials, c10::cuda::getCurrentCUDAStream(dy.device().index()).stream());
  } catch (const std::exception& e) {
    throw RuntimeError(str("cast_to_fp8_dbias: ", e.what()));
  }
  return m;
}

}  // namespace megaton::ops::fp8
