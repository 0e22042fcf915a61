// The second pass of the column-sum kernels (included by .cu files only): the fp32 partial sums a first kernel left
// per block of rows, added in a fixed order (deterministic on one GPU) and stored where a ColumnSumOut says.
#pragma once
#include <cstdint>

#include "kernel_util.cuh"

namespace megaton::kernels::util {

/// db[c] = sum over p of partial[p, c] (partial [partials, cols]), in order of p; one thread per column.
template <typename T>
__global__ void sum_partials_kernel(const float* __restrict__ partial, int64_t partials, int64_t cols,
                                    ColumnSumOut db) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float s = 0.0f;
  for (int64_t p = 0; p < partials; ++p) s += partial[p * cols + c];
  store_column_sum<T>(db, c, s);
}

/// Launches sum_partials_kernel<T> on `stream` (256 threads a block).
template <typename T>
void launch_sum_partials(const float* partial, int64_t partials, int64_t cols, const ColumnSumOut& db,
                         cudaStream_t stream) {
  constexpr int kThreads = 256;
  sum_partials_kernel<T>
      <<<static_cast<unsigned>((cols + kThreads - 1) / kThreads), kThreads, 0, stream>>>(partial, partials, cols, db);
  check(cudaGetLastError(), "bias gradient partial sums launch");
}

}  // namespace megaton::kernels::util
