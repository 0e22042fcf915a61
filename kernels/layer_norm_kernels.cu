// Fused LayerNorm kernels (kernels/layer_norm_kernels.h). A row is handled by a group of `group` threads: one warp
// (no block-wide synchronisation) when the row is at most 96 16-byte vectors (h <= 768 bf16/fp16, h <= 384 fp32),
// otherwise a group of threads (as few as the register cache allows, at most 512) reducing through shared memory;
// each thread owns the same `P` vectors of every row it handles (vector p = t + i * group, i < P), so the backward can
// keep its dgamma/dbeta sums in registers across rows.
// A block holds `rows_per_block` groups (512 threads at most) and strides over the rows; the backward's grid is
// persistent (as many blocks as fit at once) so that there are few partial sums to add up.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernel_util.cuh"
#include "layer_norm_kernels.h"

namespace megaton::kernels {

namespace {

using util::check;
using util::from_float;
using util::to_float;

constexpr int kMaxThreads = 512;   // threads per block at most (every kernel's launch bound)
constexpr int kWarpRowUnits = 96;  // a warp per row up to this many vectors per row (3 per lane)
constexpr int kReduceCols = 16;    // gamma_beta_kernel: columns per block
constexpr int kReduceRows = 32;    // gamma_beta_kernel: threads over the partials per column

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

// Sum of v over the calling thread's group of `group` threads (a multiple of 32; groups are consecutive threads).
// kWarp: group == 32, no block synchronisation. Otherwise every thread of the block must call it. red: one float per
// warp of the block.
template <bool kWarp>
__device__ __forceinline__ float group_sum(float v, float* red, int group) {
  v = warp_sum(v);
  if (kWarp) return v;
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  const int per = group >> 5, first = (threadIdx.x / group) * per;
  float s = 0.f;
  for (int w = 0; w < per; ++w) s += red[first + w];
  __syncthreads();  // red is reused by the next call
  return s;
}

template <bool kWarp>
__device__ __forceinline__ float2 group_sum2(float2 v, float2* red, int group) {
  v.x = warp_sum(v.x);
  v.y = warp_sum(v.y);
  if (kWarp) return v;
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  const int per = group >> 5, first = (threadIdx.x / group) * per;
  float2 s = make_float2(0.f, 0.f);
  for (int w = 0; w < per; ++w) {
    s.x += red[first + w].x;
    s.y += red[first + w].y;
  }
  __syncthreads();
  return s;
}

// x, y [rows, h]; gamma, beta [h]; mean, rstd [rows]. Caches the thread's P vectors of the row as fp32 (P * kVec <=
// 32 floats): one read of x, two-pass mean and variance from registers.
template <typename T, int P, bool kWarp>
__global__ void __launch_bounds__(kMaxThreads, P* Pack<T>::kVec > 24 ? 1 : 2)  // <= 64 registers, unless 32 floats
    forward_kernel(const T* __restrict__ x, const T* __restrict__ res, T* __restrict__ sum, const T* __restrict__ gamma,
                   const T* __restrict__ beta, T* __restrict__ y, float* __restrict__ mean, float* __restrict__ rstd,
                   int64_t rows, int h, int group, float eps) {
  constexpr int V = Pack<T>::kVec;
  __shared__ float red[kMaxThreads / 32];
  const int units = h / V, rows_per_block = blockDim.x / group;
  const int g = threadIdx.x / group, t = threadIdx.x - g * group;
  const float inv_h = 1.f / static_cast<float>(h);
  const auto* gp = reinterpret_cast<const Pack<T>*>(gamma);  // [units]
  const auto* bp = reinterpret_cast<const Pack<T>*>(beta);   // [units]
  // The trip count depends on blockIdx only: every thread of the block runs the same iterations (group_sum syncs).
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * rows_per_block; base < rows;
       base += static_cast<int64_t>(gridDim.x) * rows_per_block) {
    const int64_t r = base + g;
    const bool active = r < rows;
    const int64_t off = (active ? r : 0) * h;
    const auto* xr = reinterpret_cast<const Pack<T>*>(x + off);  // [units]
    float v[P][V];
    float row_sum = 0.f;
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const int p = t + i * group;
      if (active && p < units) {
        Pack<T> pk = xr[p];
        if (res != nullptr) {  // the residual add, rounded to T as ATen's x + res, normalised from the rounded sum
          const Pack<T> rk = reinterpret_cast<const Pack<T>*>(res + off)[p];
#pragma unroll
          for (int k = 0; k < V; ++k) pk.v[k] = from_float<T>(to_float(pk.v[k]) + to_float(rk.v[k]));
          reinterpret_cast<Pack<T>*>(sum + off)[p] = pk;
        }
#pragma unroll
        for (int k = 0; k < V; ++k) {
          v[i][k] = to_float(pk.v[k]);
          row_sum += v[i][k];
        }
      } else {
#pragma unroll
        for (int k = 0; k < V; ++k) v[i][k] = 0.f;
      }
    }
    const float mu = group_sum<kWarp>(row_sum, red, group) * inv_h;
    float sq = 0.f;
#pragma unroll
    for (int i = 0; i < P; ++i) {
      if (active && t + i * group < units) {
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float d = v[i][k] - mu;
          sq += d * d;
        }
      }
    }
    const float rs = rsqrtf(group_sum<kWarp>(sq, red, group) * inv_h + eps);
    if (!active) continue;
    if (t == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
    auto* yr = reinterpret_cast<Pack<T>*>(y + r * h);  // [units]
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
}

// dy, x, dx [rows, h]; gamma [h]; mean, rstd [rows]; part [2, gridDim.x, h] fp32 (dgamma partials, then dbeta).
// Each thread sums dy * xhat and dy over the rows it handles for its own columns in registers; at the end the block's
// groups are folded in a fixed order through shared memory (`fold`, [2, h] floats, when rows_per_block > 1) and the
// block writes its row of partials. x and dy of the current row stay in registers between the two passes when they
// fit (kCache), otherwise the second pass reads them again (from L1/L2: the row was just read).
template <typename T, int P, bool kWarp>
__global__ void __launch_bounds__(kMaxThreads)
    backward_kernel(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ gamma,
                    const float* __restrict__ mean, const float* __restrict__ rstd, const T* __restrict__ dres,
                    T* __restrict__ dx, float* __restrict__ part, int64_t rows, int h, int group) {
  constexpr int V = Pack<T>::kVec;
  constexpr bool kCache = 8 * P + 2 * P * V <= 72;  // registers: two raw vectors + two float sums per element
  extern __shared__ float fold[];                   // [2, h] when rows_per_block > 1
  __shared__ float2 red[kMaxThreads / 32];
  const int units = h / V, rows_per_block = blockDim.x / group;
  const int g = threadIdx.x / group, t = threadIdx.x - g * group;
  const float inv_h = 1.f / static_cast<float>(h);
  const auto* gp = reinterpret_cast<const Pack<T>*>(gamma);  // [units]
  float dg[P][V], db[P][V];                                  // this thread's columns, summed over its rows
#pragma unroll
  for (int i = 0; i < P; ++i) {
#pragma unroll
    for (int k = 0; k < V; ++k) dg[i][k] = db[i][k] = 0.f;
  }
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * rows_per_block; base < rows;
       base += static_cast<int64_t>(gridDim.x) * rows_per_block) {
    const int64_t r = base + g;
    const bool active = r < rows;
    const int64_t off = (active ? r : 0) * h;
    const auto* xr = reinterpret_cast<const Pack<T>*>(x + off);    // [units]
    const auto* dyr = reinterpret_cast<const Pack<T>*>(dy + off);  // [units]
    const float mu = active ? mean[r] : 0.f, rs = active ? rstd[r] : 0.f;
    Pack<T> xc[kCache ? P : 1], dc[kCache ? P : 1];
    float2 s = make_float2(0.f, 0.f);  // sum g, sum g * xhat
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const int p = t + i * group;
      if (active && p < units) {
        const Pack<T> xk = xr[p], dk = dyr[p], gk = gp[p];
        if constexpr (kCache) xc[i] = xk, dc[i] = dk;
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float xh = (to_float(xk.v[k]) - mu) * rs, d = to_float(dk.v[k]), gd = d * to_float(gk.v[k]);
          s.x += gd;
          s.y += gd * xh;
          dg[i][k] += d * xh;
          db[i][k] += d;
        }
      }
    }
    s = group_sum2<kWarp>(s, red, group);
    const float a = s.x * inv_h, b = s.y * inv_h;
    if (!active) continue;
    auto* dxr = reinterpret_cast<Pack<T>*>(dx + off);  // [units]
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const int p = t + i * group;
      if (p < units) {
        Pack<T> xk, dk;
        if constexpr (kCache) {
          xk = xc[i], dk = dc[i];
        } else {
          xk = xr[p], dk = dyr[p];
        }
        const Pack<T> gk = gp[p];
        Pack<T> rk;  // the residual branch's gradient, added before rounding
        if (dres != nullptr) rk = reinterpret_cast<const Pack<T>*>(dres + off)[p];
        Pack<T> o;
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float xh = (to_float(xk.v[k]) - mu) * rs, gd = to_float(dk.v[k]) * to_float(gk.v[k]);
          const float extra = dres != nullptr ? to_float(rk.v[k]) : 0.f;
          o.v[k] = from_float<T>(rs * (gd - a - xh * b) + extra);
        }
        dxr[p] = o;
      }
    }
  }
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

// part [2, partials, h] -> dgamma, dbeta [h]: column c's partials summed in a fixed order. Block (kReduceCols,
// kReduceRows), grid ceil(h / kReduceCols).
template <typename T>
__global__ void __launch_bounds__(kReduceCols* kReduceRows)
    gamma_beta_kernel(const float* __restrict__ part, int64_t partials, int h, T* __restrict__ dgamma,
                      T* __restrict__ dbeta) {
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
    dgamma[c] = from_float<T>(g);
    dbeta[c] = from_float<T>(b);
  }
}

// ~~~ host side ~~~

struct Config {
  bool warp;           // a warp per row
  int packs;           // P: 16-byte vectors per thread per row
  int group;           // threads per row
  int rows_per_block;  // groups per block
  int threads() const { return group * rows_per_block; }
};

// Floats of a row each thread caches in registers: the forward caches x (32: 4 bf16/fp16 vectors, 8 fp32 ones); the
// backward caches x and dy, so it takes half as many per tensor to stay at the same register count and occupancy.
enum class Pass { kForward, kBackward };

// h is supported (layer_norm_supported_width) and a multiple of vec.
Config choose(int64_t h, int vec, Pass pass) {
  const int units = static_cast<int>(h / vec);
  if (units <= kWarpRowUnits) return {true, (units + 31) / 32, 32, kMaxThreads / 32};
  // As many vectors per thread as the fp32 register cache holds, so that each thread has several 16-byte loads in
  // flight and a row needs few threads: forward h = 2048 bf16 is 64 threads of 4 vectors, 8 rows per block. (One
  // vector per thread, 256 threads per row, reached 1.4 TB/s on an H200; 4 per thread 3.2 TB/s forward, but the
  // backward with 4 went from 88 to 126 us per call at 1.3B, a third more bytes: 2.1 TB/s.)
  const int cache = pass == Pass::kForward ? 32 : 16;
  int packs = std::min(cache / vec, (units + 31) / 32);
  packs = std::max(packs, (units + kMaxThreads - 1) / kMaxThreads);  // group <= kMaxThreads
  if (packs == 5 || packs == 7) ++packs;                             // instantiated: 1, 2, 3, 4, 6, 8
  const int group = ((units + packs - 1) / packs + 31) / 32 * 32;    // <= kMaxThreads
  // Several rows per block fold their dgamma/dbeta sums through [2, h] floats of shared memory: at most the 48 KiB a
  // launch gets without opting in (h <= 6144), else one row per block.
  const bool fold_fits = 2 * h * static_cast<int64_t>(sizeof(float)) <= 48 * 1024;
  return {false, packs, group, fold_fits ? std::max(1, kMaxThreads / group) : 1};
}

void check_args(int64_t rows, int64_t h, std::initializer_list<const void*> pointers, const char* what) {
  if (!layer_norm_supported_width(h))
    throw std::invalid_argument(std::string(what) + ": unsupported row width " + std::to_string(h) +
                                " (need 8 <= h <= 16384, h % 8 == 0)");
  if (rows < 0) throw std::invalid_argument(std::string(what) + ": negative row count");
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
      throw std::invalid_argument(std::string(what) + ": a pointer is not 16-byte aligned");
}

// Calls f(std::integral_constant<int, P>, std::bool_constant<kWarp>) for the instantiated kernel of `c`.
template <typename T, typename F>
void dispatch(const Config& c, F&& f) {
  auto go = [&](auto packs) {
    constexpr int P = decltype(packs)::value;
    if constexpr (P * Pack<T>::kVec <= 32) {
      if (!c.warp) return f(packs, std::false_type{});
      if constexpr (P * 32 <= kWarpRowUnits) return f(packs, std::true_type{});
    }
    throw std::logic_error("layer_norm: no kernel instantiated for " + std::to_string(c.packs) + " vectors per thread");
  };
  switch (c.packs) {
    case 1:
      return go(std::integral_constant<int, 1>{});
    case 2:
      return go(std::integral_constant<int, 2>{});
    case 3:
      return go(std::integral_constant<int, 3>{});
    case 4:
      return go(std::integral_constant<int, 4>{});
    case 6:
      return go(std::integral_constant<int, 6>{});
    case 8:
      return go(std::integral_constant<int, 8>{});
    default:
      throw std::logic_error("layer_norm: no kernel for " + std::to_string(c.packs) + " vectors per thread");
  }
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

template <typename T>
void launch_forward(const void* x, const void* res, void* sum, const void* gamma, const void* beta, void* y,
                    float* mean, float* rstd, int64_t rows, int64_t h, float eps, cudaStream_t stream) {
  const Config c = choose(h, Pack<T>::kVec, Pass::kForward);
  const int64_t blocks = std::min<int64_t>(ceil_div(rows, c.rows_per_block), 1 << 30);
  dispatch<T>(c, [&](auto packs, auto warp) {
    forward_kernel<T, decltype(packs)::value, decltype(warp)::value>
        <<<static_cast<unsigned>(blocks), c.threads(), 0, stream>>>(
            static_cast<const T*>(x), static_cast<const T*>(res), static_cast<T*>(sum), static_cast<const T*>(gamma),
            static_cast<const T*>(beta), static_cast<T*>(y), mean, rstd, rows, static_cast<int>(h), c.group, eps);
  });
  check(cudaGetLastError(), "layer_norm_forward launch");
}

template <typename T>
int64_t backward_partials(int64_t rows, int64_t h) {
  const Config c = choose(h, Pack<T>::kVec, Pass::kBackward);
  const size_t smem = c.rows_per_block > 1 ? 2 * h * sizeof(float) : 0;
  int per_sm = 0;
  dispatch<T>(c, [&](auto packs, auto warp) {
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
              &per_sm, backward_kernel<T, decltype(packs)::value, decltype(warp)::value>, c.threads(), smem),
          "layer_norm_backward occupancy");
  });
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  const int64_t resident = static_cast<int64_t>(std::max(per_sm, 1)) * sms;
  return std::max<int64_t>(1, std::min(ceil_div(rows, c.rows_per_block), resident));
}

template <typename T>
void launch_backward(const void* dy, const void* x, const void* gamma, const float* mean, const float* rstd,
                     const void* dres, void* dx, void* dgamma, void* dbeta, float* workspace, int64_t partials,
                     int64_t rows, int64_t h, cudaStream_t stream) {
  const Config c = choose(h, Pack<T>::kVec, Pass::kBackward);
  const size_t smem = c.rows_per_block > 1 ? 2 * h * sizeof(float) : 0;
  dispatch<T>(c, [&](auto packs, auto warp) {
    backward_kernel<T, decltype(packs)::value, decltype(warp)::value>
        <<<static_cast<unsigned>(partials), c.threads(), smem, stream>>>(
            static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const T*>(gamma), mean, rstd,
            static_cast<const T*>(dres), static_cast<T*>(dx), workspace, rows, static_cast<int>(h), c.group);
  });
  check(cudaGetLastError(), "layer_norm_backward launch");
  gamma_beta_kernel<T><<<static_cast<unsigned>(ceil_div(h, kReduceCols)), dim3(kReduceCols, kReduceRows), 0, stream>>>(
      workspace, partials, static_cast<int>(h), static_cast<T*>(dgamma), static_cast<T*>(dbeta));
  check(cudaGetLastError(), "layer_norm_backward gamma/beta launch");
}

}  // namespace

void layer_norm_forward(const void* x, const void* gamma, const void* beta, void* y, float* mean, float* rstd,
                        FloatType type, int64_t rows, int64_t h, float eps, cudaStream_t stream, const void* residual,
                        void* sum) {
  check_args(rows, h, {x, gamma, beta, y}, "layer_norm_forward");
  if ((residual == nullptr) != (sum == nullptr))
    throw std::invalid_argument("layer_norm_forward: residual and sum go together");
  if (residual != nullptr) check_args(rows, h, {residual, sum}, "layer_norm_forward");
  if (rows == 0) return;
  switch (type) {
    case FloatType::kFloat32:
      return launch_forward<float>(x, residual, sum, gamma, beta, y, mean, rstd, rows, h, eps, stream);
    case FloatType::kBFloat16:
      return launch_forward<__nv_bfloat16>(x, residual, sum, gamma, beta, y, mean, rstd, rows, h, eps, stream);
    case FloatType::kFloat16:
      return launch_forward<__half>(x, residual, sum, gamma, beta, y, mean, rstd, rows, h, eps, stream);
  }
}

int64_t layer_norm_backward_partials(FloatType type, int64_t rows, int64_t h) {
  check_args(rows, h, {}, "layer_norm_backward_partials");
  switch (type) {
    case FloatType::kFloat32:
      return backward_partials<float>(rows, h);
    case FloatType::kBFloat16:
      return backward_partials<__nv_bfloat16>(rows, h);
    case FloatType::kFloat16:
      return backward_partials<__half>(rows, h);
  }
  return 1;
}

void layer_norm_backward(const void* dy, const void* x, const void* gamma, const float* mean, const float* rstd,
                         void* dx, void* dgamma, void* dbeta, float* workspace, int64_t partials, FloatType type,
                         int64_t rows, int64_t h, cudaStream_t stream, const void* dresidual) {
  check_args(rows, h, {dy, x, gamma, dx}, "layer_norm_backward");
  if (dresidual != nullptr) check_args(rows, h, {dresidual}, "layer_norm_backward");
  if (partials < 1 || partials > (int64_t{1} << 30))
    throw std::invalid_argument("layer_norm_backward: partials must be in [1, 2^30]");
  switch (type) {
    case FloatType::kFloat32:
      return launch_backward<float>(dy, x, gamma, mean, rstd, dresidual, dx, dgamma, dbeta, workspace, partials, rows,
                                    h, stream);
    case FloatType::kBFloat16:
      return launch_backward<__nv_bfloat16>(dy, x, gamma, mean, rstd, dresidual, dx, dgamma, dbeta, workspace, partials,
                                            rows, h, stream);
    case FloatType::kFloat16:
      return launch_backward<__half>(dy, x, gamma, mean, rstd, dresidual, dx, dgamma, dbeta, workspace, partials, rows,
                                     h, stream);
  }
}

}  // namespace megaton::kernels
