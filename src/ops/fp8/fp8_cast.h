// A CUDA matrix cast to FP8 for the FP8 GEMMs (kernels/fp8_cast_kernels.cu), declared only in CUDA builds: its bytes,
// optionally their transpose, and the scale inverse the GEMM multiplies back by. The host's equivalent of one element
// is ops/fp8/fp8_format.h's fp8_round(x * scale).
#pragma once
#ifdef MEGATON_HAVE_CUDA
#include <torch/torch.h>

#include "ops/fp8/fp8_format.h"
#include "ops/linear.h"  // MainGrad

namespace megaton::ops::fp8 {

struct Fp8Matrix {
  torch::Tensor bytes;      // [r, c] uint8
  torch::Tensor bytes_t;    // [c, r] uint8, or undefined
  torch::Tensor scale_inv;  // fp32 [1]: 1 / scale
  Format format = Format::kE4M3;
};

/// x [r, c] (bf16, fp16 or fp32, contiguous, on a GPU) cast as fp8_round(x * scale) with scale an fp32 [1] tensor on
/// x's device; with `transpose`, bytes_t too. When `amax` (fp32 [1] on the device) is defined, amax = max(amax,
/// max |x|) in the same pass.
Fp8Matrix cast_to_fp8(const torch::Tensor& x, const torch::Tensor& scale, Format format, bool transpose,
                      const torch::Tensor& amax = {});

/// An [rows, cols] cast's result to be written: its bytes (and their transpose) allocated on `device`, scale_inv =
/// 1 / scale.
Fp8Matrix new_fp8_matrix(int64_t rows, int64_t cols, const torch::Device& device, const torch::Tensor& scale,
                         Format format, bool transpose);

/// bytes [r, c] (uint8, contiguous, on a GPU: FP8 some other kernel wrote) -> their transpose [c, r].
torch::Tensor transpose_fp8(const torch::Tensor& bytes);

/// Whether cast_to_fp8_dbias takes dy (and gelu_pre, where defined): on a GPU, bf16 or fp16, 2-D, contiguous, 16-byte
/// aligned, both dimensions multiples of 64; gelu_pre of dy's shape, dtype and device.
bool cast_to_fp8_dbias_supported(const torch::Tensor& dy, const torch::Tensor& gelu_pre = {});

/// A linear layer's output gradient as its FP8 GEMMs read it, with its bias gradient, in one pass
/// (kernels/fp8_cast_dbias_kernels.h): g = dy, or with gelu_pre defined the GELU input's gradient
/// gelu_tanh'(gelu_pre) * dy in dy's dtype; returns cast_to_fp8(g, scale, format, /*transpose=*/true, amax), bit for
/// bit. With want_db, g's column sums go where column_sum_out(main, ..) puts them: into main, or a new [c] vector of
/// dy's dtype returned in db (else db is left undefined). Requires cast_to_fp8_dbias_supported(dy, gelu_pre).
Fp8Matrix cast_to_fp8_dbias(const torch::Tensor& dy, const torch::Tensor& gelu_pre, const torch::Tensor& scale,
                            Format format, const torch::Tensor& amax, bool want_db, const MainGrad& main,
                            torch::Tensor& db);

}  // namespace megaton::ops::fp8

#endif  // MEGATON_HAVE_CUDA
