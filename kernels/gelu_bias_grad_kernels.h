// The MLP's GELU backward with fc1's bias gradient fused in, CUDA. ATen runs gelu_backward (reads d_act and pre,
// writes d_pre) and then sum(0) over d_pre (reads it again): for GPT 1.3B that second read is 268 MB per layer, ~2.3 ms
// of a step on an H200. Here one pass reads d_act and pre, writes d_pre and leaves the column sums as fp32 partials
// per block of rows; a second, small kernel sums the partials in a fixed order (deterministic on one GPU).
//
// Per element, fp32 whatever the element type, in the order of ATen's GeluBackwardCUDAKernelImpl (approximate="tanh"):
//   inner = beta (x + kappa x^3), beta = sqrt(2/pi), kappa = 0.044715;  t = tanh(inner)
//   d_pre = d_act * (0.5 (1 + t) + 0.5 x (1 - t^2) beta (1 + 3 kappa x^2))      rounded to the element type
//   db[j] = sum_r d_pre[r, j]  over the rounded values (what ATen's sum reads), accumulated in fp32
// d_act, pre, d_pre [rows, cols] row-major; db [cols]; all of one element type, every pointer 16-byte aligned and
// cols % 8 == 0 (loads and stores are 8-element vectors). Plain CUDA; src/ops/gelu_bias_grad_cuda.cpp wraps it.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "float_type.h"

namespace megaton::kernels {

/// Rows of fp32 partial sums either kernel wants in its workspace (workspace: partials * cols floats).
int64_t gelu_bias_grad_partials(int64_t rows, int64_t cols);

/// Writes d_pre and db. type: bf16 or fp16 (fp32 is not vectorised here; the caller uses ATen for it).
/// Asynchronous on `stream`; throws std::invalid_argument for a shape or alignment it does not take and
/// std::runtime_error when a launch fails.
void gelu_backward_bias_grad(const void* d_act, const void* pre, void* d_pre, void* db, float* workspace,
                             int64_t partials, FloatType type, int64_t rows, int64_t cols, cudaStream_t stream);

/// The same column sums without the GELU: db[j] = sum_r dy[r, j] (a linear layer's bias gradient; ATen's sum(0) reads
/// at ~2.3 TB/s on an H200), fp32 partials in a fixed order as above. dy [rows, cols], db [cols]; bf16 or fp16, dy
/// 16-byte aligned, cols % 8 == 0. Throws as gelu_backward_bias_grad.
void bias_grad(const void* dy, void* db, float* workspace, int64_t partials, FloatType type, int64_t rows, int64_t cols,
               cudaStream_t stream);

}  // namespace megaton::kernels
