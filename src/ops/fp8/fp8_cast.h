// A CUDA matrix cast to FP8 for the FP8 GEMMs (kernels/fp8_cast_kernels.cu), declared only in CUDA builds: its bytes,
// optionally their transpose, and the scale inverse the GEMM multiplies back by. The host's equivalent of one element
// is ops/fp8/fp8_format.h's fp8_round(x * scale).
#pragma once
#ifdef MEGATON_HAVE_CUDA
#include <torch/torch.h>

#include "ops/fp8/fp8_format.h"

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

}  // namespace megaton::ops::fp8

#endif  // MEGATON_HAVE_CUDA
