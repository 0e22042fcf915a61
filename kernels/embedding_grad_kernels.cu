// kernels/embedding_grad_kernels.h: one thread block per kChunk positions of the sorted ids; the block sums every
// segment (run of one id) that starts among its positions, reading on past its chunk's end when the segment does (a
// frequent token's long segment costs that one block more rows, split over the block's lanes), and adds the sum to
// the id's row of the main grad. Every id is written by exactly one block: no atomics, one fixed order.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "embedding_grad_kernels.h"
#include "kernel_util.cuh"

namespace megaton::kernels {

namespace {

using util::check;
using util::to_float;

constexpr int kChunk = 32;        // sorted positions per block
constexpr int kShort = 8;         // segments of up to this many rows: summed by one lane of the block
constexpr int kMaxThreads = 512;  // threads per block at most

template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Pack {
  T v[VEC];
};

// A block is `lanes` x `cols` threads: a thread takes the packs p = col, col + cols, ... of a row (VEC elements each;
// VEC = 1: the unaligned fallback). A segment of up to kShort rows is summed by one lane, in row order, the lanes on
// different segments at once. Of a longer segment, a thread takes the rows i + lane, i + lane + lanes, ...; the lanes'
// sums meet in shared memory and lane 0 adds them, in lane order, to the main grad: several lanes keep more loads in
// flight on a long segment (a frequent token's: thousands of rows summed by this one block).
template <typename T, int VEC>
__global__ void __launch_bounds__(kMaxThreads)
    segment_sum_kernel(const int64_t* __restrict__ sorted, const int64_t* __restrict__ order,
                       const T* __restrict__ grad, int64_t n, int64_t h, float* __restrict__ main, int64_t rows,
                       int cols) {
  __shared__ float red[kMaxThreads * VEC];  // [lanes][cols][VEC]
  const int lanes = blockDim.x / cols, lane = threadIdx.x / cols, col = threadIdx.x - lane * cols;
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kChunk, end = min(n, begin + kChunk);
  const int64_t packs = h / VEC;
  // Short segments (most of them on ordinary text: an id seen a few times in a batch), one per lane side by side, no
  // barrier: lane l sums the segments that start at the chunk's positions l, l + lanes, ...
  for (int64_t i = begin + lane; i < end; i += lanes) {
    const int64_t id = sorted[i];
    if ((i > 0 && sorted[i - 1] == id) || id < 0 || id >= rows) continue;  // not a segment's start, or not ours
    int64_t stop = i + 1;
    while (stop < n && stop <= i + kShort && sorted[stop] == id) ++stop;
    if (stop - i > kShort) continue;  // a long one: below
    float* out = main + id * h;       // [h]
    for (int64_t p = col; p < packs; p += cols) {
      float acc[VEC];
#pragma unroll
      for (int k = 0; k < VEC; ++k) acc[k] = 0.f;
      for (int64_t j = i; j < stop; ++j) {
        const Pack<T, VEC> g = reinterpret_cast<const Pack<T, VEC>*>(grad + order[j] * h)[p];
#pragma unroll
        for (int k = 0; k < VEC; ++k) acc[k] += to_float(g.v[k]);
      }
#pragma unroll
      for (int k = 0; k < VEC; ++k) out[p * VEC + k] += acc[k];
    }
  }
  // Long segments: every lane of the block on one at a time.
  for (int64_t i = begin; i < end; ++i) {  // the same i, id and segment in every thread of the block
    const int64_t id = sorted[i];
    if ((i > 0 && sorted[i - 1] == id) || id < 0 || id >= rows) continue;  // not a segment's start, or not ours
    int64_t stop = i + 1;
    while (stop < n && sorted[stop] == id) ++stop;
    if (stop - i <= kShort) continue;               // summed above
    float* out = main + id * h;                     // [h]
    for (int64_t p0 = 0; p0 < packs; p0 += cols) {  // every thread runs the same iterations (barriers below)
      const int64_t p = p0 + col;
      float acc[VEC];
#pragma unroll
      for (int k = 0; k < VEC; ++k) acc[k] = 0.f;
      if (p < packs) {
#pragma unroll 4
        for (int64_t j = i + lane; j < stop; j += lanes) {
          const Pack<T, VEC> g = reinterpret_cast<const Pack<T, VEC>*>(grad + order[j] * h)[p];
#pragma unroll
          for (int k = 0; k < VEC; ++k) acc[k] += to_float(g.v[k]);
        }
      }
#pragma unroll
      for (int k = 0; k < VEC; ++k) red[threadIdx.x * VEC + k] = acc[k];
      __syncthreads();
      if (lane == 0 && p < packs) {
        for (int l = 1; l < lanes; ++l) {
#pragma unroll
          for (int k = 0; k < VEC; ++k) acc[k] += red[(l * cols + col) * VEC + k];
        }
#pragma unroll
        for (int k = 0; k < VEC; ++k) out[p * VEC + k] += acc[k];
      }
      __syncthreads();  // red is rewritten next
    }
  }
}

template <typename T>
void launch(const int64_t* sorted, const int64_t* order, const void* grad, int64_t n, int64_t h, float* main,
            int64_t rows, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  const bool vec = h % kVec == 0 && reinterpret_cast<uintptr_t>(grad) % 16 == 0;
  const int64_t packs = vec ? h / kVec : h;
  const int cols = static_cast<int>(std::clamp<int64_t>((packs + 31) / 32 * 32, 32, kMaxThreads));
  const int threads = kMaxThreads / cols * cols;  // lanes x cols
  const auto blocks = static_cast<unsigned>((n + kChunk - 1) / kChunk);
  const T* g = static_cast<const T*>(grad);
  if (vec)
    segment_sum_kernel<T, kVec><<<blocks, threads, 0, stream>>>(sorted, order, g, n, h, main, rows, cols);
  else
    segment_sum_kernel<T, 1><<<blocks, threads, 0, stream>>>(sorted, order, g, n, h, main, rows, cols);
  check(cudaGetLastError(), "embedding_grad_accumulate launch");
}

}  // namespace

void embedding_grad_accumulate(const int64_t* sorted_ids, const int64_t* order, const void* grad, FloatType type,
                               int64_t n, int64_t h, float* main, int64_t rows, cudaStream_t stream) {
  if (n < 0 || h < 0 || rows < 0) throw std::invalid_argument("embedding_grad_accumulate: negative size");
  if (n == 0 || h == 0) return;
  switch (type) {
    case FloatType::kFloat32:
      return launch<float>(sorted_ids, order, grad, n, h, main, rows, stream);
    case FloatType::kBFloat16:
      return launch<__nv_bfloat16>(sorted_ids, order, grad, n, h, main, rows, stream);
    case FloatType::kFloat16:
      return launch<__half>(sorted_ids, order, grad, n, h, main, rows, stream);
  }
}

}  // namespace megaton::kernels
