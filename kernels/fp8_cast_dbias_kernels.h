// A gradient's FP8 cast with the bias gradient in the same pass, CUDA (Transformer Engine's cast_transpose_dbias and
// dgelu_cast_transpose_dbias): the dgrad and wgrad GEMMs of an FP8 linear layer read the output gradient as FP8 bytes
// and their transpose, and its bias gradient is that gradient's column sums; done apart, the bias gradient (and, for
// the MLP's fc1, the GELU's derivative) reads the gradient once more and the cast reads a 16-bit copy written only for
// it. Here one read of dy (and of the GELU's input) writes the FP8 bytes, their transpose and the amax, and leaves the
// column sums as fp32 partials per block of rows, which a second, small kernel adds in a fixed order (deterministic on
// one GPU).
//
// Per element, g = dy, or with the GELU g = gelu_tanh'(pre) * dy rounded to the element type (the d_pre of
// kernels/gelu_bias_grad_kernels.h, bit for bit); then out = fp8(g * scale), out_t its transpose, amax = max(amax,
// max |g|), db[c] = sum over rows of g (fp32). So the bytes, their transpose and the amax are those of
// gelu_backward_bias_grad followed by cast_to_fp8 (kernels/fp8_cast_kernels.h); the sums differ from theirs only in
// summation order. Plain CUDA; src/ops/fp8/fp8_cast_cuda.cpp wraps it.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "column_sum_out.h"
#include "float_type.h"
#include "fp8_cast_kernels.h"  // Fp8Type

namespace megaton::kernels {

/// Whether cast_to_fp8_dbias takes a [rows, cols] gradient: both multiples of 64 (the kernel's tiles).
bool cast_to_fp8_dbias_takes(int64_t rows, int64_t cols);

/// The row groups cast_to_fp8_dbias's grid wants for a [rows, cols] gradient (about 4 blocks per SM): as many rows of
/// fp32 partial sums in its workspace (partials * cols floats).
int64_t cast_to_fp8_dbias_partials(int64_t rows, int64_t cols);

/// dy [rows, cols] (and gelu_pre [rows, cols], or null for no GELU), of `in_type` bf16 or fp16, row-major, 16-byte
/// aligned; cast_to_fp8_dbias_takes(rows, cols). out [rows, cols] and out_t [cols, rows] (16-byte aligned) get the
/// FP8 bytes under scale[0] and their transpose; amax[0] (>= 0) = max(amax[0], max |g|); db the column sums, or
/// nothing when db.out and db.main are both null (workspace then unused). partials: cast_to_fp8_dbias_partials's.
/// `scale` and `amax` are device pointers. Asynchronous on `stream`; throws std::invalid_argument for what it does not
/// take and std::runtime_error when a launch fails.
void cast_to_fp8_dbias(const void* dy, const void* gelu_pre, FloatType in_type, int64_t rows, int64_t cols,
                       const float* scale, Fp8Type type, uint8_t* out, uint8_t* out_t, float* amax,
                       const ColumnSumOut& db, float* workspace, int64_t partials, cudaStream_t stream);

}  // namespace megaton::kernels
