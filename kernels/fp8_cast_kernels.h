// The cast of a 16-bit (or fp32) matrix to FP8 under a per-tensor scale, as the FP8 GEMMs read it, CUDA: one pass
// that writes the row-major FP8 bytes, optionally their transpose (the column-major copy the input-gradient and
// weight-gradient GEMMs need: Hopper's FP8 GEMMs take both operands K-major), and the input's absolute maximum for
// the scaling recipe. The conversion saturates (cvt.rn.satfinite: nearest, ties to even, clamped to the largest
// finite value), as ops/fp8/fp8_format.h's fp8_round does on the host.
// Plain CUDA (no torch headers); src/ops/fp8/fp8_cast_cuda.cpp wraps it.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "float_type.h"

namespace megaton::kernels {

enum class Fp8Type { kE4M3, kE5M2 };

/// out [rows, cols] = fp8(in [rows, cols] * scale[0]); out_t [cols, rows] its transpose when not null; amax[0] =
/// max(amax[0], max |in|) when amax is not null (amax[0] must be >= 0). `scale` and `amax` are device pointers.
/// Contiguous row-major buffers, on `stream`.
void cast_to_fp8(const void* in, FloatType in_type, int64_t rows, int64_t cols, const float* scale, Fp8Type type,
                 uint8_t* out, uint8_t* out_t, float* amax, cudaStream_t stream);

/// out [cols, rows] = in [rows, cols]^T, FP8 bytes (the column-major copy of a matrix some other kernel wrote as FP8,
/// for the GEMMs that read it K-major the other way). Contiguous row-major buffers, on `stream`.
void transpose_fp8(const uint8_t* in, int64_t rows, int64_t cols, uint8_t* out, cudaStream_t stream);

}  // namespace megaton::kernels
