// The embedding's weight gradient added straight into its fp32 main grad, CUDA, deterministically. ATen's
// embedding_dense_backward (radix sort, per-segment partial sums, a scatter into a zero-filled model-dtype [V, h]
// gradient) and then the add of that whole [V, h] gradient into the fp32 main grad cost ~0.8 ms per GPT-2 124M step
// on an H200 (profiled); here, after the same sort (torch::sort), one kernel sums each id's rows in fp32 and
// adds them to that id's row of the main grad: no [V, h] model-dtype gradient, no fill, no second pass.
//
//   main[id, :] += sum over the rows k with ids[k] = id of grad[k, :]      (main [rows, h] fp32, grad [n, h])
//
// Each id is summed by one thread block, in the order `order` lists its rows (a stable sort: ascending k), so the
// result is the same bits every run. Plain CUDA (no torch headers); src/ops/embedding_cuda.cpp wraps it.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "float_type.h"

namespace megaton::kernels {

/// sorted_ids [n] ascending and order [n] with sorted_ids[i] = ids[order[i]] (a stable sort of the ids); grad [n, h]
/// of `type`, row k the gradient of the lookup of ids[k]; main [rows, h] fp32. Ids outside [0, rows) are skipped.
/// Asynchronous on `stream`; contiguous buffers, any alignment (16-byte vectors where the pointers and h allow);
/// throws std::invalid_argument for negative sizes and std::runtime_error when the launch fails.
void embedding_grad_accumulate(const int64_t* sorted_ids, const int64_t* order, const void* grad, FloatType type,
                               int64_t n, int64_t h, float* main, int64_t rows, cudaStream_t stream);

}  // namespace megaton::kernels
