// Pieces the LayerNorm kernels share (kernels/layer_norm_kernels.cu: one element type;
// kernels/layer_norm_mixed_kernels.cu: an fp32 residual stream with a 16-bit model), included by those two .cu files
// only: the 16-byte vectors, the row groups' reductions, the hidden dropout's draws, the dgamma/dbeta partial sums and
// their reduction, and the host-side choice of how a row is split among threads (layer_norm_kernels.cu's opening
// comment describes the scheme).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <curand_philox4x32_x.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernel_util.cuh"
#include "layer_norm_kernels.h"

namespace megaton::kernels {

/// The dropout's arguments are usable: 0 < p < 1 (or p == 0: none), a 16-bit type, the keep bits given
/// (layer_norm_kernels.cu).
void check_dropout(float p, FloatType type, const void* keep, const void* extra, const char* what);

namespace layer_norm_detail {

using util::check;
using util::from_float;
using util::optin_smem;
using util::to_float;

constexpr int kMaxThreads = 512;             // threads per block at most (every kernel's launch bound)
constexpr int kMaxWarps = kMaxThreads / 32;  // warps per block at most
constexpr int kReduceCols = 16;              // gamma_beta_kernel: columns per block
constexpr int kReduceRows = 32;              // gamma_beta_kernel: threads over the partials per column

// One 16-byte load or store: 8 bf16/fp16 or 4 fp32.
template <typename T>
struct alignas(16) Pack {
  static constexpr int kVec = 16 / sizeof(T);
  T v[kVec];
};

__device__ __forceinline__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;  // the same bits in every lane
}

// The forward's dropout as its kernels take it (ResidualDropout, host-side values; a kernel without dropout ignores
// it).
struct DropArgs {
  PhiloxSeed philox;
  uint32_t threshold = 0;  // keep iff the element's 32-bit draw < threshold: floor((1 - p) * 2^32)
  float scale = 1.f;       // 1 / (1 - p)
  uint8_t* keep = nullptr;
};

// The backward's (ResidualDropoutGrad, host-side values).
struct DropGradArgs {
  const uint8_t* keep = nullptr;
  void* dx = nullptr;
  float scale = 1.f;
};

// The (seed, counter) of this launch's draws: ATen's at::cuda::philox::unpack, the counter in 4-word blocks.
struct PhiloxKey {
  uint2 key;
  uint64_t block;
};
__device__ __forceinline__ PhiloxKey philox_key(const PhiloxSeed& s) {
  const uint64_t seed = s.seed_ptr != nullptr ? static_cast<uint64_t>(*s.seed_ptr) : s.seed;
  const uint64_t offset =
      s.offset_ptr != nullptr ? static_cast<uint64_t>(*s.offset_ptr) + s.offset_intragraph : s.offset;
  return {make_uint2(static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)), offset / 4};
}

// The keep bits of pack q (elements 8 q .. 8 q + 7; bit k for element 8 q + k): the eight words of Philox4x32-10 at
// counters (block, q) and (block + 1, q), each compared with the threshold.
__device__ __forceinline__ uint32_t keep_bits8(const PhiloxKey& k, uint64_t q, uint32_t threshold) {
  const uint32_t q_lo = static_cast<uint32_t>(q), q_hi = static_cast<uint32_t>(q >> 32);
  const uint64_t b1 = k.block + 1;
  const uint4 a = curand_Philox4x32_10(
      make_uint4(static_cast<uint32_t>(k.block), static_cast<uint32_t>(k.block >> 32), q_lo, q_hi), k.key);
  const uint4 b =
      curand_Philox4x32_10(make_uint4(static_cast<uint32_t>(b1), static_cast<uint32_t>(b1 >> 32), q_lo, q_hi), k.key);
  return static_cast<uint32_t>(a.x < threshold) | static_cast<uint32_t>(a.y < threshold) << 1 |
         static_cast<uint32_t>(a.z < threshold) << 2 | static_cast<uint32_t>(a.w < threshold) << 3 |
         static_cast<uint32_t>(b.x < threshold) << 4 | static_cast<uint32_t>(b.y < threshold) << 5 |
         static_cast<uint32_t>(b.z < threshold) << 6 | static_cast<uint32_t>(b.w < threshold) << 7;
}

// d * keep * scale for the 8 elements of a pack from their keep bits (a dropped element: d * 0, as ATen's masked
// scale).
template <typename T>
__device__ __forceinline__ void drop_scale(const T (&d)[8], uint32_t bits, float scale, T (&out)[8]) {
#pragma unroll
  for (int k = 0; k < 8; ++k) out[k] = from_float<T>(to_float(d[k]) * ((bits >> k) & 1u ? scale : 0.f));
}

// Waits for the `threads` threads (whole warps) of group g only: hardware barrier 1 + g (0 is __syncthreads'; at most
// 15 groups per block, which kMaxThreads / 64 keeps).
__device__ __forceinline__ void group_barrier(int g, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(1 + g), "r"(threads) : "memory");
}

// Sums each of v[0..N) over the calling thread's group of `group` threads (a multiple of 32; groups are consecutive
// threads); every thread gets the sums. kWarp: group == 32, shuffles only. Otherwise each warp's lane 0 writes its
// partial sums to red (double-buffered: [2][N][kMaxWarps], `phase` alternates between the halves, so the next call can
// write while slower threads still read this one's) and the group meets at its barrier.
template <int N, bool kWarp>
__device__ __forceinline__ void group_sum(float (&v)[N], float* red, int group, int& phase) {
#pragma unroll
  for (int n = 0; n < N; ++n) v[n] = warp_sum(v[n]);
  if constexpr (kWarp) return;
  float* buf = red + phase * N * kMaxWarps;
  phase ^= 1;
  const int warp = threadIdx.x >> 5, g = threadIdx.x / group;
  if ((threadIdx.x & 31) == 0) {
#pragma unroll
    for (int n = 0; n < N; ++n) buf[n * kMaxWarps + warp] = v[n];
  }
  group_barrier(g, group);
  const int per = group >> 5, first = g * per;
#pragma unroll
  for (int n = 0; n < N; ++n) {
    float s = 0.f;
    for (int w = 0; w < per; ++w) s += buf[n * kMaxWarps + first + w];
    v[n] = s;
  }
}

// The rest of a forward row once the thread holds its P vectors of the row in registers (v, zero past the row's end)
// and their sum in stat (overwritten): the mean and the two-pass variance, each summed over the group; mean[r] and
// rstd[r] written by the group's first thread; y = (v - mean) rstd gamma + beta rounded to T, in T's 16-byte vectors.
template <typename T, int P, bool kWarp>
__device__ __forceinline__ void normalize_row(const float (&v)[P][Pack<T>::kVec], float (&stat)[1], const Pack<T>* gp,
                                              const Pack<T>* bp, Pack<T>* yr, float* mean, float* rstd, int64_t r,
                                              int units, int t, int group, float inv_h, float eps, float* red,
                                              int& phase) {
  constexpr int V = Pack<T>::kVec;
  group_sum<1, kWarp>(stat, red, group, phase);
  const float mu = stat[0] * inv_h;
  stat[0] = 0.f;
#pragma unroll
  for (int i = 0; i < P; ++i) {
    if (t + i * group < units) {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float d = v[i][k] - mu;
        stat[0] += d * d;
      }
    }
  }
  group_sum<1, kWarp>(stat, red, group, phase);
  const float rs = rsqrtf(stat[0] * inv_h + eps);
  if (t == 0) {
    mean[r] = mu;
    rstd[r] = rs;
  }
#pragma unroll
  for (int i = 0; i < P; ++i) {
    const int p = t + i * group;
    if (p < units) {
      const Pack<T> gk = gp[p], bk = bp[p];
      Pack<T> o;
#pragma unroll
      for (int k = 0; k < V; ++k) o.v[k] = from_float<T>((v[i][k] - mu) * rs * to_float(gk.v[k]) + to_float(bk.v[k]));
      yr[p] = o;
    }
  }
}

// The end of a backward block: its dgamma/dbeta sums (each thread's columns, dg and db) as the block's row of
// partials in part [2, gridDim.x, h]; several groups per block are folded in a fixed order through `fold` ([2, h]
// floats of shared memory) first. Every thread of the block calls it.
// V: the elements of each of a thread's P vectors.
template <int V, int P>
__device__ __forceinline__ void write_partials(const float (&dg)[P][V], const float (&db)[P][V], float* fold,
                                               float* part, int h, int units, int group, int rows_per_block, int g,
                                               int t) {
  float* pg = part + static_cast<int64_t>(blockIdx.x) * h;                // [h] dgamma partial
  float* pb = part + (static_cast<int64_t>(gridDim.x) + blockIdx.x) * h;  // [h] dbeta partial
  if (rows_per_block == 1) {
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const int p = t + i * group;
      if (p < units) {
#pragma unroll
        for (int k = 0; k < V; ++k) pg[p * V + k] = dg[i][k], pb[p * V + k] = db[i][k];
      }
    }
    return;
  }
  // Fold the groups last to first: group rows_per_block - 1 stores, each earlier group adds in turn.
  for (int j = rows_per_block - 1; j >= 0; --j) {
    if (g == j) {
#pragma unroll
      for (int i = 0; i < P; ++i) {
        const int p = t + i * group;
        if (p < units) {
#pragma unroll
          for (int k = 0; k < V; ++k) {
            const int c = p * V + k;
            fold[c] = (j == rows_per_block - 1 ? 0.f : fold[c]) + dg[i][k];
            fold[h + c] = (j == rows_per_block - 1 ? 0.f : fold[h + c]) + db[i][k];
          }
        }
      }
    }
    __syncthreads();
  }
  for (int c = threadIdx.x; c < h; c += blockDim.x) pg[c] = fold[c], pb[c] = fold[h + c];
}

// part [2, partials, h] -> dgamma, dbeta [h]: column c's partials summed in a fixed order, each stored in the
// element type or into its fp32 main grad (ColumnSumOut). Block (kReduceCols, kReduceRows), grid ceil(h / kReduceCols).
template <typename T>
__global__ void __launch_bounds__(kReduceCols* kReduceRows)
    gamma_beta_kernel(const float* __restrict__ part, int64_t partials, int h, ColumnSumOut dgamma,
                      ColumnSumOut dbeta) {
  __shared__ float sg[kReduceRows][kReduceCols + 1], sb[kReduceRows][kReduceCols + 1];
  const int c = blockIdx.x * kReduceCols + threadIdx.x;
  float g = 0.f, b = 0.f;
  if (c < h) {
    const float* pg = part + c;                 // column c of [partials, h]
    const float* pb = part + partials * h + c;  // column c of the dbeta partials
#pragma unroll 4
    for (int64_t j = threadIdx.y; j < partials; j += kReduceRows) {
      g += pg[j * h];
      b += pb[j * h];
    }
  }
  sg[threadIdx.y][threadIdx.x] = g;
  sb[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && c < h) {
    for (int j = 1; j < kReduceRows; ++j) g += sg[j][threadIdx.x], b += sb[j][threadIdx.x];
    util::store_column_sum<T>(dgamma, c, g);
    util::store_column_sum<T>(dbeta, c, b);
  }
}

// ~~~ host side ~~~

struct Config {
  int packs;           // P: vectors (of `vec` elements, choose's) per thread per row
  int rows;            // R: rows per pass of a group (the backward's)
  int group;           // threads per row
  int rows_per_block;  // groups per block
  bool early = false;  // the backward loads the residual gradient with x and dy (instantiated for R = 1, <= 8 floats)
  int stages = 0;      // the backward's shared-memory ring (backward_staged_kernel): 0 (none), 2 or 4 rows
  int threads() const { return group * rows_per_block; }
  bool warp() const { return group == 32; }  // a warp per row: shuffles only
};

// h is supported (layer_norm_supported_width) and a multiple of vec. `floats`: the elements of a row each thread
// takes (LayerNormTuning), rounded to whole vectors; more when a row would need more than kMaxThreads threads. A row
// whose threads fit in one warp gets one. rows: the backward's rows per pass (1 for the forward). A block holds as many
// groups as fit in block_threads (at least one).
inline Config choose(int64_t h, int vec, int floats, int rows, int block_threads) {
  block_threads = std::clamp(block_threads, 32, kMaxThreads);
  const int units = static_cast<int>(h / vec);
  int packs = std::min(std::max(1, floats / vec), (units + 31) / 32);
  packs = std::max(packs, (units + kMaxThreads - 1) / kMaxThreads);  // group <= kMaxThreads
  if (packs == 5 || packs == 7) ++packs;                             // instantiated: 1, 2, 3, 4, 6, 8
  const int group = ((units + packs - 1) / packs + 31) / 32 * 32;    // <= kMaxThreads
  if (packs * vec > 8) rows = 1;                                     // R = 2 is instantiated up to 8 floats
  // Several rows per block fold their dgamma/dbeta sums through [2, h] floats of shared memory: at most the 48 KiB a
  // launch gets without opting in (h <= 6144; always so for a warp per row, h <= 1024), else one row per block.
  // (Forward: the same, harmlessly.)
  const bool fold_fits = 2 * h * static_cast<int64_t>(sizeof(float)) <= 48 * 1024;
  return {packs, rows, group, fold_fits ? std::max(1, block_threads / group) : 1};
}

inline Config forward_config(int64_t h, int vec, const LayerNormTuning& tuning) {
  // 0: a warp per row where a warp holds the row at <= 32 elements per thread, else 16 per thread.
  const int floats = tuning.forward_floats > 0 ? tuning.forward_floats : (h <= 32 * 32 ? 32 : 16);
  return choose(h, vec, floats, 1, tuning.forward_block);
}

inline void check_args(int64_t rows, int64_t h, std::initializer_list<const void*> pointers, const char* what) {
  if (!layer_norm_supported_width(h))
    throw std::invalid_argument(std::string(what) + ": unsupported row width " + std::to_string(h) +
                                " (need 8 <= h <= 16384, h % 8 == 0)");
  if (rows < 0) throw std::invalid_argument(std::string(what) + ": negative row count");
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
      throw std::invalid_argument(std::string(what) + ": a pointer is not 16-byte aligned");
}

// Calls go(std::integral_constant<int, P>) for the vectors per thread a Config can pick (choose: 1, 2, 3, 4, 6, 8), up
// to kMaxPacks (the kernels instantiated: a caller whose choices stop at 4 instantiates no more).
template <int kMaxPacks = 8, typename Go>
void with_packs(int packs, Go&& go) {
  switch (packs) {
    case 1:
      return go(std::integral_constant<int, 1>{});
    case 2:
      return go(std::integral_constant<int, 2>{});
    case 3:
      return go(std::integral_constant<int, 3>{});
    case 4:
      return go(std::integral_constant<int, 4>{});
    case 6:
      if constexpr (kMaxPacks >= 6) return go(std::integral_constant<int, 6>{});
      break;
    case 8:
      if constexpr (kMaxPacks >= 8) return go(std::integral_constant<int, 8>{});
      break;
    default:
      break;
  }
  throw std::logic_error("layer_norm: no kernel for " + std::to_string(packs) + " vectors per thread");
}

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// 1 / (1 - p): the scale of a kept element, forward and backward alike.
inline float keep_scale(float p) {
  return static_cast<float>(1.0 / (1.0 - static_cast<double>(p)));
}

// The kernels' view of a ResidualDropout with p > 0.
inline DropArgs drop_args(const ResidualDropout& d) {
  DropArgs a;
  a.philox = d.philox;
  const double keep = 1.0 - static_cast<double>(d.p);
  a.threshold = static_cast<uint32_t>(std::min(4294967295.0, std::floor(keep * 4294967296.0)));
  a.scale = keep_scale(d.p);
  a.keep = d.keep;
  return a;
}

// Lets `kernel` take `bytes` of dynamic shared memory (beyond the 48 KiB a launch gets without opting in).
template <typename K>
void allow_smem(K kernel, size_t bytes) {
  if (bytes > 48 * 1024)
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
          "layer_norm_backward shared memory");
}

}  // namespace layer_norm_detail

}  // namespace megaton::kernels
