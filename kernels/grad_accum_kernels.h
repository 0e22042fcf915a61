// main_grad += grad: a parameter's model-dtype gradient (bf16, fp16 or fp32) added into its fp32 main-grad view, CUDA.
// ATen's `main.add_(grad)` with mixed dtypes takes its non-vectorised ("unrolled") elementwise kernel: ~5.9 ms per
// GPT 1.3B step on an H200 for ~12 bytes a parameter; this kernel moves the same bytes with 16-byte loads and stores
// wherever both pointers allow it.
// Plain CUDA (no torch headers); src/parallel/grad_accum_cuda.cpp wraps it.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "float_type.h"

namespace megaton::kernels {

/// main[i] += (float)grad[i] for i < n, on `stream`. Contiguous buffers; any alignment.
void accumulate_grad_fp32(const void* grad, FloatType grad_type, float* main, int64_t n, cudaStream_t stream);

}  // namespace megaton::kernels
