// Fused LayerNorm kernels (kernels/layer_norm_kernels.h). A row is handled by a group of `group` threads: one warp
// (no synchronisation beyond shuffles) or several warps reducing through shared memory behind a named barrier of their
// own (`bar.sync 1 + g, group`), so that the rows of one block never wait for each other: while one group reduces,
// the others' loads are in flight. Each thread owns the same `P` vectors of every row it handles (vector p = t + i *
// group, i < P), so the backward keeps its dgamma/dbeta sums in registers across rows; the backward's group takes `R`
// rows per pass (their loads issued together, one barrier for both reductions). A block holds `rows_per_block`
// groups (512 threads at most); each group strides over the rows on its own; the backward's grid is persistent (as
// many blocks as fit at once) so that there are few partial sums to add up. How many vectors a thread takes is
// LayerNormTuning's choice (layer_norm_kernels.h; perf/bench_layer_norm.cpp measures the alternatives).
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "layer_norm_common.cuh"

namespace megaton::kernels {

namespace {

using namespace layer_norm_detail;

// x, y [rows, h]; gamma, beta [h]; mean, rstd [rows]. Caches the thread's P vectors of the row as fp32 (P * kVec <=
// 32 floats): one read of x, two-pass mean and variance from registers.
// kDrop (16-bit T, with the residual): x is dropped out before the add (ResidualDropout), its keep bits written.
template <typename T, int P, bool kWarp, bool kDrop>
__global__ void __launch_bounds__(kMaxThreads, P* Pack<T>::kVec > 24 ? 1 : 2)  // <= 64 registers, unless 32 floats
    forward_kernel(const T* __restrict__ x, const T* __restrict__ res, T* __restrict__ sum, const T* __restrict__ gamma,
                   const T* __restrict__ beta, T* __restrict__ y, float* __restrict__ mean, float* __restrict__ rstd,
                   int64_t rows, int h, int group, float eps, DropArgs drop) {
  constexpr int V = Pack<T>::kVec;
  static_assert(!kDrop || V == 8, "the dropout takes 8-element packs (16-bit types)");
  PhiloxKey pkey{};
  if constexpr (kDrop) pkey = philox_key(drop.philox);
  __shared__ float red[2 * kMaxWarps];
  const int units = h / V, rows_per_block = blockDim.x / group;
  const int g = threadIdx.x / group, t = threadIdx.x - g * group;
  const float inv_h = 1.f / static_cast<float>(h);
  const auto* gp = reinterpret_cast<const Pack<T>*>(gamma);  // [units]
  const auto* bp = reinterpret_cast<const Pack<T>*>(beta);   // [units]
  int phase = 0;
  // The row depends on the group only: every thread of a group runs the same iterations (group_sum waits for them).
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * rows_per_block + g; r < rows;
       r += static_cast<int64_t>(gridDim.x) * rows_per_block) {
    const int64_t off = r * h;
    const auto* xr = reinterpret_cast<const Pack<T>*>(x + off);  // [units]
    float v[P][V];
    float stat[1] = {0.f};
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const int p = t + i * group;
      if (p < units) {
        Pack<T> pk = xr[p];
        if (res != nullptr) {  // the residual add, rounded to T as ATen's x + res, normalised from the rounded sum
          const Pack<T> rk = reinterpret_cast<const Pack<T>*>(res + off)[p];
          if constexpr (kDrop) {  // x dropped out first, rounded to T as ATen's fused dropout rounds it
            const int64_t q = off / V + p;
            const uint32_t bits = keep_bits8(pkey, static_cast<uint64_t>(q), drop.threshold);
            drop.keep[q] = static_cast<uint8_t>(bits);
            drop_scale<T>(pk.v, bits, drop.scale, pk.v);
          }
#pragma unroll
          for (int k = 0; k < V; ++k) pk.v[k] = from_float<T>(to_float(pk.v[k]) + to_float(rk.v[k]));
          reinterpret_cast<Pack<T>*>(sum + off)[p] = pk;
        }
#pragma unroll
        for (int k = 0; k < V; ++k) {
          v[i][k] = to_float(pk.v[k]);
          stat[0] += v[i][k];
        }
      } else {
#pragma unroll
        for (int k = 0; k < V; ++k) v[i][k] = 0.f;
      }
    }
    normalize_row<T, P, kWarp>(v, stat, gp, bp, reinterpret_cast<Pack<T>*>(y + off), mean, rstd, r, units, t, group,
                               inv_h, eps, red, phase);
  }
}

// dy, x, dx [rows, h]; gamma [h]; mean, rstd [rows]; part [2, gridDim.x, h] fp32 (dgamma partials, then dbeta).
// Each thread sums dy * xhat and dy over the rows it handles for its own columns in registers; at the end the block's
// groups are folded in a fixed order through shared memory (`fold`, [2, h] floats, when rows_per_block > 1) and the
// block writes its row of partials. A group takes R consecutive rows per pass: x and dy of all R rows are loaded
// (and kept in registers for the second half when they fit), then one group_sum reduces the 2 R row sums. kEarly:
// the residual gradient is loaded with them (more bytes in flight before the reduction) instead of after it.
// kDrop (16-bit T, R = 1): dx dropped out as the forward's keep bits say is written too (ResidualDropoutGrad).
template <typename T, int P, int R, bool kWarp, bool kEarly, bool kDrop>
__global__ void __launch_bounds__(kMaxThreads, P* R* Pack<T>::kVec <= 8 ? 2 : 1)  // <= 64 registers at 8 floats
    backward_kernel(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ gamma,
                    const float* __restrict__ mean, const float* __restrict__ rstd, const T* __restrict__ dres,
                    T* __restrict__ dx, float* __restrict__ part, int64_t rows, int h, int group, DropGradArgs drop) {
  constexpr int V = Pack<T>::kVec;
  static_assert(!kDrop || (V == 8 && R == 1), "the dropout's gradient takes 8-element packs, one row per pass");
  extern __shared__ float fold[];  // [2, h] when rows_per_block > 1
  __shared__ float red[2 * 2 * R * kMaxWarps];
  const int units = h / V, rows_per_block = blockDim.x / group;
  const int g = threadIdx.x / group, t = threadIdx.x - g * group;
  const float inv_h = 1.f / static_cast<float>(h);
  // This thread's gamma vectors, the same for every row: kept in registers up to 16 floats per thread (beyond, the
  // registers go to the sums and each use reads gamma again, from L1).
  constexpr bool kGammaCached = P * R * V <= 16;
  // x and dy of the pass's rows stay in registers between the two halves up to 16 floats per tensor; beyond, the
  // second half reads them again (from L1/L2: they were just read).
  constexpr bool kCache = P * R * V <= 16;
  const auto* gp = reinterpret_cast<const Pack<T>*>(gamma);  // [units]
  Pack<T> gk[kGammaCached ? P : 1];
  if constexpr (kGammaCached) {
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const int p = t + i * group;
      if (p < units) gk[i] = gp[p];
    }
  }
  auto gamma_of = [&](int i, int p) -> Pack<T> {
    if constexpr (kGammaCached) return gk[i];
    return gp[p];
  };
  float dg[P][V], db[P][V];  // this thread's columns, summed over its rows
#pragma unroll
  for (int i = 0; i < P; ++i) {
#pragma unroll
    for (int k = 0; k < V; ++k) dg[i][k] = db[i][k] = 0.f;
  }
  int phase = 0;
  for (int64_t r0 = (static_cast<int64_t>(blockIdx.x) * rows_per_block + g) * R; r0 < rows;
       r0 += static_cast<int64_t>(gridDim.x) * rows_per_block * R) {
    Pack<T> xc[R][P], dc[R][P], rc[kEarly ? R : 1][kEarly ? P : 1];  // rc: dres, loaded with x and dy (kEarly)
    uint32_t kb[kDrop ? P : 1];                                      // the dropout's keep bits (kDrop, R = 1)
    float mu[R], rs[R];
    float s[2 * R];  // per row: sum g, sum g * xhat (g = dy * gamma)
#pragma unroll
    for (int j = 0; j < R; ++j) {
      const int64_t r = r0 + j;
      const bool active = r < rows;
      mu[j] = active ? mean[r] : 0.f;
      rs[j] = active ? rstd[r] : 0.f;
      s[2 * j] = s[2 * j + 1] = 0.f;
      const auto* xr = reinterpret_cast<const Pack<T>*>(x + (active ? r : 0) * h);    // [units]
      const auto* dyr = reinterpret_cast<const Pack<T>*>(dy + (active ? r : 0) * h);  // [units]
#pragma unroll
      for (int i = 0; i < P; ++i) {
        const int p = t + i * group;
        if (active && p < units) {
          xc[j][i] = xr[p], dc[j][i] = dyr[p];
          if constexpr (kEarly) {
            if (dres != nullptr) rc[j][i] = reinterpret_cast<const Pack<T>*>(dres + r * h)[p];
          }
          if constexpr (kDrop) kb[i] = drop.keep[r * units + p];
        }
      }
    }
#pragma unroll
    for (int j = 0; j < R; ++j) {
      if (r0 + j >= rows) continue;
#pragma unroll
      for (int i = 0; i < P; ++i) {
        const int p = t + i * group;
        if (p >= units) continue;
        const Pack<T> gv = gamma_of(i, p);
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float xh = (to_float(xc[j][i].v[k]) - mu[j]) * rs[j], d = to_float(dc[j][i].v[k]);
          const float gd = d * to_float(gv.v[k]);
          s[2 * j] += gd;
          s[2 * j + 1] += gd * xh;
          dg[i][k] += d * xh;
          db[i][k] += d;
        }
      }
    }
    group_sum<2 * R, kWarp>(s, red, group, phase);
#pragma unroll
    for (int j = 0; j < R; ++j) {
      const int64_t r = r0 + j;
      if (r >= rows) continue;
      const float a = s[2 * j] * inv_h, b = s[2 * j + 1] * inv_h;
      const int64_t off = r * h;
      auto* dxr = reinterpret_cast<Pack<T>*>(dx + off);  // [units]
#pragma unroll
      for (int i = 0; i < P; ++i) {
        const int p = t + i * group;
        if (p >= units) continue;
        Pack<T> rk;  // the residual branch's gradient, added before rounding
        if constexpr (kEarly) {
          if (dres != nullptr) rk = rc[j][i];
        } else {
          if (dres != nullptr) rk = reinterpret_cast<const Pack<T>*>(dres + off)[p];
        }
        const Pack<T> gv = gamma_of(i, p);
        const Pack<T> xk = kCache ? xc[j][i] : reinterpret_cast<const Pack<T>*>(x + off)[p];
        const Pack<T> dk = kCache ? dc[j][i] : reinterpret_cast<const Pack<T>*>(dy + off)[p];
        Pack<T> o;
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float xh = (to_float(xk.v[k]) - mu[j]) * rs[j];
          const float gd = to_float(dk.v[k]) * to_float(gv.v[k]);
          const float extra = dres != nullptr ? to_float(rk.v[k]) : 0.f;
          o.v[k] = from_float<T>(rs[j] * (gd - a - xh * b) + extra);
        }
        dxr[p] = o;
        if constexpr (kDrop) {
          Pack<T> od;
          drop_scale<T>(o.v, kb[i], drop.scale, od.v);
          reinterpret_cast<Pack<T>*>(static_cast<T*>(drop.dx) + off)[p] = od;
        }
      }
    }
  }
  write_partials<Pack<T>::kVec, P>(dg, db, fold, part, h, units, group, rows_per_block, g, t);
}

// Ampere-style asynchronous 16-byte copies (cp.async, sm_80), global -> shared memory, each thread copying only what it
// reads itself: waiting for its own copy groups is all the synchronisation a thread needs. Before sm_80 a plain
// 16-byte load and store (complete at once; commit and wait do nothing).
__device__ __forceinline__ void copy_async16(void* smem, const void* gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(smem))),
               "l"(gmem)
               : "memory");
#else
  *static_cast<uint4*>(smem) = *static_cast<const uint4*>(gmem);
#endif
}
__device__ __forceinline__ void copy_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void copy_async_wait() {  // all but the N most recent groups have landed
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

// backward_kernel (one row per pass) with the loads running S - 1 rows ahead: each thread copies its vectors of x, dy
// and the residual gradient for the group's next rows into its own slots of a shared-memory ring of S rows (cp.async,
// no registers held while they are in flight) and computes on the row that landed. backward_kernel keeps one row's
// loads per thread in flight and stalls on them before every reduction (~2.6-2.9 TB/s on an H200). Dynamic shared
// memory: the fold ([2, h] floats when rows_per_block > 1), then the ring Pack<T> [S][3][P][blockDim.x].
// kDrop: as backward_kernel's.
template <typename T, int P, bool kWarp, int S, bool kDrop>
__global__ void __launch_bounds__(kMaxThreads, 2)
    backward_staged_kernel(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ gamma,
                           const float* __restrict__ mean, const float* __restrict__ rstd, const T* __restrict__ dres,
                           T* __restrict__ dx, float* __restrict__ part, int64_t rows, int h, int group,
                           DropGradArgs drop) {
  constexpr int V = Pack<T>::kVec;
  static_assert(!kDrop || V == 8, "the dropout's gradient takes 8-element packs");
  extern __shared__ __align__(16) float dyn[];
  __shared__ float red[2 * 2 * kMaxWarps];
  const int units = h / V, rows_per_block = blockDim.x / group;
  const int g = threadIdx.x / group, t = threadIdx.x - g * group;
  const float inv_h = 1.f / static_cast<float>(h);
  float* fold = dyn;                                                                // [2, h]
  auto* ring = reinterpret_cast<Pack<T>*>(dyn + (rows_per_block > 1 ? 2 * h : 0));  // [S][3][P][threads]
  auto slot = [&](int s, int tensor, int i) { return ring + ((s * 3 + tensor) * P + i) * blockDim.x + threadIdx.x; };
  const auto* gp = reinterpret_cast<const Pack<T>*>(gamma);  // [units]
  Pack<T> gk[P];
#pragma unroll
  for (int i = 0; i < P; ++i) {
    const int p = t + i * group;
    if (p < units) gk[i] = gp[p];
  }
  float dg[P][V], db[P][V];  // this thread's columns, summed over its rows
#pragma unroll
  for (int i = 0; i < P; ++i) {
#pragma unroll
    for (int k = 0; k < V; ++k) dg[i][k] = db[i][k] = 0.f;
  }
  const int64_t stride = static_cast<int64_t>(gridDim.x) * rows_per_block;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * rows_per_block + g;
  // One commit group per row (empty past the last row), so that "all but the newest S - 1 groups" is always "up to
  // this row".
  auto issue = [&](int64_t r, int s) {
    if (r < rows) {
      const int64_t off = r * h;
#pragma unroll
      for (int i = 0; i < P; ++i) {
        const int p = t + i * group;
        if (p >= units) continue;
        copy_async16(slot(s, 0, i), x + off + p * V);
        copy_async16(slot(s, 1, i), dy + off + p * V);
        if (dres != nullptr) copy_async16(slot(s, 2, i), dres + off + p * V);
      }
    }
    copy_async_commit();
  };
#pragma unroll
  for (int s = 0; s < S - 1; ++s) issue(first + s * stride, s);
  int phase = 0, s = 0;  // s: the ring slot of row r
  float mu_next = first < rows ? mean[first] : 0.f, rs_next = first < rows ? rstd[first] : 0.f;
  for (int64_t r = first; r < rows; r += stride, s = s + 1 == S ? 0 : s + 1) {
    // The slot of the previous row is free: this thread read it last iteration, and nobody else reads it.
    issue(r + (S - 1) * stride, s == 0 ? S - 1 : s - 1);
    copy_async_wait<S - 1>();
    const float mu = mu_next, rs = rs_next;
    if (r + stride < rows) mu_next = mean[r + stride], rs_next = rstd[r + stride];  // used next pass
    uint32_t kb[kDrop ? P : 1];  // the dropout's keep bits, loaded before the reduction
    if constexpr (kDrop) {
#pragma unroll
      for (int i = 0; i < P; ++i) {
        const int p = t + i * group;
        if (p < units) kb[i] = drop.keep[r * units + p];
      }
    }
    float sums[2] = {0.f, 0.f};  // sum g, sum g * xhat (g = dy * gamma)
#pragma unroll
    for (int i = 0; i < P; ++i) {
      if (t + i * group >= units) continue;
      const Pack<T> xk = *slot(s, 0, i), dk = *slot(s, 1, i);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float xh = (to_float(xk.v[k]) - mu) * rs, d = to_float(dk.v[k]);
        const float gd = d * to_float(gk[i].v[k]);
        sums[0] += gd;
        sums[1] += gd * xh;
        dg[i][k] += d * xh;
        db[i][k] += d;
      }
    }
    group_sum<2, kWarp>(sums, red, group, phase);
    const float a = sums[0] * inv_h, b = sums[1] * inv_h;
    auto* dxr = reinterpret_cast<Pack<T>*>(dx + r * h);  // [units]
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const int p = t + i * group;
      if (p >= units) continue;
      const Pack<T> xk = *slot(s, 0, i), dk = *slot(s, 1, i);
      Pack<T> rk;
      if (dres != nullptr) rk = *slot(s, 2, i);
      Pack<T> o;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float xh = (to_float(xk.v[k]) - mu) * rs;
        const float gd = to_float(dk.v[k]) * to_float(gk[i].v[k]);
        const float extra = dres != nullptr ? to_float(rk.v[k]) : 0.f;
        o.v[k] = from_float<T>(rs * (gd - a - xh * b) + extra);
      }
      dxr[p] = o;
      if constexpr (kDrop) {
        Pack<T> od;
        drop_scale<T>(o.v, kb[i], drop.scale, od.v);
        reinterpret_cast<Pack<T>*>(static_cast<T*>(drop.dx) + r * h)[p] = od;
      }
    }
  }
  copy_async_wait<0>();  // the empty groups past the last row (nothing may be in flight at exit)
  write_partials<Pack<T>::kVec, P>(dg, db, fold, part, h, units, group, rows_per_block, g, t);
}

// The dropout's gradient as a pass of its own (LayerNormTuning::backward_dropout_fused = false): out = dx * keep *
// scale over `packs` 8-element packs, grid-stride.
template <typename T>
__global__ void __launch_bounds__(256) dropout_grad_kernel(const T* __restrict__ dx, const uint8_t* __restrict__ keep,
                                                           T* __restrict__ out, int64_t packs, float scale) {
  const auto* in = reinterpret_cast<const Pack<T>*>(dx);
  auto* o = reinterpret_cast<Pack<T>*>(out);
  for (int64_t q = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; q < packs;
       q += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const Pack<T> d = in[q];
    Pack<T> r;
    drop_scale<T>(d.v, keep[q], scale, r.v);
    o[q] = r;
  }
}

// The backward's dynamic shared memory: the fold of several groups' sums, and the ring of a staged backward.
size_t backward_smem(const Config& c, int64_t h) {
  const size_t fold = c.rows_per_block > 1 ? 2 * h * sizeof(float) : 0;
  return fold + static_cast<size_t>(c.stages) * 3 * c.packs * 16 * c.threads();  // ring: [S][3][P][threads] vectors
}

// drop: the kernel writes the dropout's gradient too (one row per pass).
Config backward_config(int64_t h, int vec, const LayerNormTuning& tuning, bool drop) {
  const bool staged = tuning.backward_stages == 2 || tuning.backward_stages == 4;
  Config c = choose(h, vec, tuning.backward_floats, staged || drop ? 1 : std::clamp(tuning.backward_rows, 1, 2),
                    tuning.backward_block);
  c.early = tuning.backward_early_residual && c.rows == 1 && c.packs * vec <= 8;
  if (staged && c.packs * vec <= 8) {  // instantiated up to 8 floats per thread; where its ring fits
    c.stages = tuning.backward_stages;
    if (backward_smem(c, h) + 2 * 1024 > static_cast<size_t>(optin_smem())) c.stages = 0;
  }
  return c;
}

// Calls f(std::integral_constant<int, P>, std::integral_constant<int, R>, std::bool_constant<kWarp>,
// std::bool_constant<kEarly>) for the instantiated kernel of `c` (the forward's lambdas ignore R and kEarly: 1, false).
template <typename T, typename F>
void dispatch(const Config& c, F&& f) {
  auto go = [&](auto packs) {
    constexpr int P = decltype(packs)::value;
    if constexpr (P * Pack<T>::kVec <= 32) {
      auto rows = [&](auto r) {
        constexpr bool kEarlyInstantiated = decltype(r)::value == 1 && P * Pack<T>::kVec <= 8;
        auto early = [&](auto warp) {
          if constexpr (kEarlyInstantiated) {
            if (c.early) return f(packs, r, warp, std::true_type{});
          }
          return f(packs, r, warp, std::false_type{});
        };
        if (c.warp()) return early(std::true_type{});
        return early(std::false_type{});
      };
      if (c.rows == 1) return rows(std::integral_constant<int, 1>{});
      if constexpr (P * Pack<T>::kVec <= 8) {
        if (c.rows == 2) return rows(std::integral_constant<int, 2>{});
      }
    }
    throw std::logic_error("layer_norm: no kernel instantiated for " + std::to_string(c.packs) + " vectors and " +
                           std::to_string(c.rows) + " rows per thread");
  };
  with_packs(c.packs, go);
}

// Calls f(std::integral_constant<int, P>, std::bool_constant<kWarp>, std::integral_constant<int, S>) for the
// instantiated backward_staged_kernel of `c` (c.stages 2 or 4, P * vec <= 8: beyond, 64 registers spill).
template <typename T, typename F>
void dispatch_staged(const Config& c, F&& f) {
  auto go = [&](auto packs) {
    constexpr int P = decltype(packs)::value;
    if constexpr (P * Pack<T>::kVec <= 8) {
      auto staged = [&](auto stages) {
        if (c.warp()) return f(packs, std::true_type{}, stages);
        return f(packs, std::false_type{}, stages);
      };
      if (c.stages == 2) return staged(std::integral_constant<int, 2>{});
      if (c.stages == 4) return staged(std::integral_constant<int, 4>{});
    }
    throw std::logic_error("layer_norm: no staged backward for " + std::to_string(c.packs) + " vectors and " +
                           std::to_string(c.stages) + " stages");
  };
  with_packs(c.packs, go);
}

// Calls g(std::bool_constant<kDrop>) for `drop` (kernels with the dropout's gradient exist for 16-bit types only).
template <typename T, typename G>
void with_drop(bool drop, G&& g) {
  if constexpr (sizeof(T) == 2) {
    if (drop) return g(std::true_type{});
  }
  if (drop) throw std::logic_error("layer_norm: the dropout takes 16-bit types only");
  g(std::false_type{});
}

// Calls f(kernel) with the backward kernel `c` and `drop` pick (staged or not, with the dropout's gradient or not),
// all of one signature.
template <typename T, typename F>
void with_backward_kernel(const Config& c, bool drop, F&& f) {
  if (c.stages > 0) {
    dispatch_staged<T>(c, [&](auto packs, auto warp, auto stages) {
      constexpr int P = decltype(packs)::value, S = decltype(stages)::value;
      constexpr bool W = decltype(warp)::value;
      with_drop<T>(drop, [&](auto kdrop) { f(backward_staged_kernel<T, P, W, S, decltype(kdrop)::value>); });
    });
    return;
  }
  dispatch<T>(c, [&](auto packs, auto rows_per_pass, auto warp, auto early) {
    constexpr int P = decltype(packs)::value, R = decltype(rows_per_pass)::value;
    constexpr bool W = decltype(warp)::value, E = decltype(early)::value;
    with_drop<T>(drop, [&](auto kdrop) {
      constexpr bool D = decltype(kdrop)::value;
      if constexpr (R == 1 || !D) {
        f(backward_kernel<T, P, R, W, E, D>);
      } else {
        throw std::logic_error("layer_norm: the dropout's gradient takes one row per pass");
      }
    });
  });
}

template <typename T>
void launch_forward(const void* x, const void* res, void* sum, const void* gamma, const void* beta, void* y,
                    float* mean, float* rstd, int64_t rows, int64_t h, float eps, cudaStream_t stream,
                    const LayerNormTuning& tuning, const ResidualDropout& dropout) {
  const Config c = forward_config(h, Pack<T>::kVec, tuning);
  const int64_t blocks = std::min<int64_t>(ceil_div(rows, c.rows_per_block), 1 << 30);
  const bool drop = dropout.p > 0.f;
  const DropArgs args = drop ? drop_args(dropout) : DropArgs{};
  dispatch<T>(c, [&](auto packs, auto, auto warp, auto) {
    constexpr int P = decltype(packs)::value;
    constexpr bool W = decltype(warp)::value;
    with_drop<T>(drop, [&](auto kdrop) {
      forward_kernel<T, P, W, decltype(kdrop)::value><<<static_cast<unsigned>(blocks), c.threads(), 0, stream>>>(
          static_cast<const T*>(x), static_cast<const T*>(res), static_cast<T*>(sum), static_cast<const T*>(gamma),
          static_cast<const T*>(beta), static_cast<T*>(y), mean, rstd, rows, static_cast<int>(h), c.group, eps, args);
    });
  });
  check(cudaGetLastError(), "layer_norm_forward launch");
}

// drop: the backward kernel writes the dropout's gradient (a ResidualDropoutGrad, fused).
template <typename T>
int64_t backward_partials(int64_t rows, int64_t h, const LayerNormTuning& tuning, bool drop) {
  const Config c = backward_config(h, Pack<T>::kVec, tuning, drop);
  const size_t smem = backward_smem(c, h);
  int per_sm = 0;
  with_backward_kernel<T>(c, drop, [&](auto kernel) {
    allow_smem(kernel, smem);
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, c.threads(), smem),
          "layer_norm_backward occupancy");
  });
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  const int64_t resident = static_cast<int64_t>(std::max(per_sm, 1)) * sms;
  return std::max<int64_t>(1, std::min(ceil_div(rows, int64_t{c.rows_per_block} * c.rows), resident));
}

template <typename T>
void launch_backward(const void* dy, const void* x, const void* gamma, const float* mean, const float* rstd,
                     const void* dres, void* dx, const ColumnSumOut& dgamma, const ColumnSumOut& dbeta,
                     float* workspace, int64_t partials, int64_t rows, int64_t h, cudaStream_t stream,
                     const LayerNormTuning& tuning, const ResidualDropoutGrad& dropout) {
  const bool drop = dropout.p > 0.f, fused_drop = drop && tuning.backward_dropout_fused;
  const DropGradArgs args{dropout.keep, dropout.dx_dropout, drop ? keep_scale(dropout.p) : 1.f};
  const Config c = backward_config(h, Pack<T>::kVec, tuning, fused_drop);
  const size_t smem = backward_smem(c, h);
  with_backward_kernel<T>(c, fused_drop, [&](auto kernel) {
    allow_smem(kernel, smem);
    kernel<<<static_cast<unsigned>(partials), c.threads(), smem, stream>>>(
        static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const T*>(gamma), mean, rstd,
        static_cast<const T*>(dres), static_cast<T*>(dx), workspace, rows, static_cast<int>(h), c.group, args);
  });
  check(cudaGetLastError(), "layer_norm_backward launch");
  if (drop && !fused_drop) {
    if constexpr (sizeof(T) == 2) {
      const int64_t packs = rows * h / Pack<T>::kVec;
      const int64_t blocks = std::min<int64_t>(ceil_div(packs, 256), 1 << 20);
      dropout_grad_kernel<T><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
          static_cast<const T*>(dx), dropout.keep, static_cast<T*>(dropout.dx_dropout), packs, args.scale);
      check(cudaGetLastError(), "layer_norm_backward dropout gradient launch");
    }
  }
  gamma_beta_kernel<T><<<static_cast<unsigned>(ceil_div(h, kReduceCols)), dim3(kReduceCols, kReduceRows), 0, stream>>>(
      workspace, partials, static_cast<int>(h), dgamma, dbeta);
  check(cudaGetLastError(), "layer_norm_backward gamma/beta launch");
}

}  // namespace

// The dropout's arguments are usable: 0 < p < 1 (or p == 0: none), a 16-bit type, the keep bits given.
void check_dropout(float p, FloatType type, const void* keep, const void* extra, const char* what) {
  if (p == 0.f) return;
  if (!(p > 0.f && p < 1.f))
    throw std::invalid_argument(std::string(what) + ": dropout probability " + std::to_string(p) + " is not in [0, 1)");
  if (type == FloatType::kFloat32)
    throw std::invalid_argument(std::string(what) + ": the fused dropout takes bf16 or fp16, not fp32");
  if (keep == nullptr || extra == nullptr)
    throw std::invalid_argument(std::string(what) + ": the dropout needs its keep bits and its other tensor");
}

void layer_norm_forward(const void* x, const void* gamma, const void* beta, void* y, float* mean, float* rstd,
                        FloatType type, int64_t rows, int64_t h, float eps, cudaStream_t stream, const void* residual,
                        void* sum, const LayerNormTuning& tuning, const ResidualDropout& dropout) {
  check_args(rows, h, {x, gamma, beta, y}, "layer_norm_forward");
  if ((residual == nullptr) != (sum == nullptr))
    throw std::invalid_argument("layer_norm_forward: residual and sum go together");
  if (residual != nullptr) check_args(rows, h, {residual, sum}, "layer_norm_forward");
  check_dropout(dropout.p, type, dropout.keep, residual, "layer_norm_forward");
  if (rows == 0) return;
  switch (type) {
    case FloatType::kFloat32:
      return launch_forward<float>(x, residual, sum, gamma, beta, y, mean, rstd, rows, h, eps, stream, tuning, dropout);
    case FloatType::kBFloat16:
      return launch_forward<__nv_bfloat16>(x, residual, sum, gamma, beta, y, mean, rstd, rows, h, eps, stream, tuning,
                                           dropout);
    case FloatType::kFloat16:
      return launch_forward<__half>(x, residual, sum, gamma, beta, y, mean, rstd, rows, h, eps, stream, tuning,
                                    dropout);
  }
}

int64_t layer_norm_backward_partials(FloatType type, int64_t rows, int64_t h, const LayerNormTuning& tuning,
                                     bool dropout) {
  check_args(rows, h, {}, "layer_norm_backward_partials");
  const bool drop = dropout && tuning.backward_dropout_fused && type != FloatType::kFloat32;
  switch (type) {
    case FloatType::kFloat32:
      return backward_partials<float>(rows, h, tuning, false);
    case FloatType::kBFloat16:
      return backward_partials<__nv_bfloat16>(rows, h, tuning, drop);
    case FloatType::kFloat16:
      return backward_partials<__half>(rows, h, tuning, drop);
  }
  return 1;
}

void layer_norm_backward(const void* dy, const void* x, const void* gamma, const float* mean, const float* rstd,
                         void* dx, const ColumnSumOut& dgamma, const ColumnSumOut& dbeta, float* workspace,
                         int64_t partials, FloatType type, int64_t rows, int64_t h, cudaStream_t stream,
                         const void* dresidual, const LayerNormTuning& tuning, const ResidualDropoutGrad& dropout) {
  check_args(rows, h, {dy, x, gamma, dx}, "layer_norm_backward");
  if (dresidual != nullptr) check_args(rows, h, {dresidual}, "layer_norm_backward");
  check_dropout(dropout.p, type, dropout.keep, dropout.dx_dropout, "layer_norm_backward");
  if (dropout.p > 0.f) check_args(rows, h, {dropout.dx_dropout}, "layer_norm_backward");
  if (partials < 1 || partials > (int64_t{1} << 30))
    throw std::invalid_argument("layer_norm_backward: partials must be in [1, 2^30]");
  switch (type) {
    case FloatType::kFloat32:
      return launch_backward<float>(dy, x, gamma, mean, rstd, dresidual, dx, dgamma, dbeta, workspace, partials, rows,
                                    h, stream, tuning, dropout);
    case FloatType::kBFloat16:
      return launch_backward<__nv_bfloat16>(dy, x, gamma, mean, rstd, dresidual, dx, dgamma, dbeta, workspace, partials,
                                            rows, h, stream, tuning, dropout);
    case FloatType::kFloat16:
      return launch_backward<__half>(dy, x, gamma, mean, rstd, dresidual, dx, dgamma, dbeta, workspace, partials, rows,
                                     h, stream, tuning, dropout);
  }
}

}  // namespace megaton::kernels
