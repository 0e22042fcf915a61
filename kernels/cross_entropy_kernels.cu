// Fused cross-entropy kernels (kernels/cross_entropy_kernels.h): one thread block per row, vectorised 16-byte loads
// where the row is aligned, fp32 arithmetic whatever the logits' type.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "cross_entropy_kernels.h"
#include "kernel_util.cuh"

namespace megaton::kernels {

namespace {

using util::check;
using util::from_float;
using util::optin_smem;
using util::to_float;

constexpr int kThreads = 512;
constexpr int kClusterThreads = 256;  // loss_grad_cluster_kernel's blocks
constexpr int kL2Threads = 1024;      // loss_grad_l2_kernel's blocks

// (max, sum of exp(x - max)) pairs: the online-softmax monoid. An empty pair is (-inf, 0).
struct MaxSum {
  float m, s;
};

__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.f};
  return {m, a.s * __expf(a.m - m) + b.s * __expf(b.m - m)};
}

__device__ __forceinline__ void add(MaxSum& acc, float x) {
  if (x > acc.m) {
    acc.s = acc.s * __expf(acc.m - x) + 1.f;
    acc.m = x;
  } else if (x != -INFINITY) {
    acc.s += __expf(x - acc.m);
  }
}

__device__ MaxSum block_reduce(MaxSum v) {  // blockDim.x <= 1024, a multiple of 32
  __shared__ MaxSum warp_results[32];
  for (int off = 16; off > 0; off >>= 1) {
    MaxSum o{__shfl_xor_sync(0xffffffffu, v.m, off), __shfl_xor_sync(0xffffffffu, v.s, off)};
    v = combine(v, o);
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_results[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < blockDim.x / 32 ? warp_results[lane] : MaxSum{-INFINITY, 0.f};
    for (int off = 16; off > 0; off >>= 1) {
      MaxSum o{__shfl_xor_sync(0xffffffffu, v.m, off), __shfl_xor_sync(0xffffffffu, v.s, off)};
      v = combine(v, o);
    }
  }
  return v;  // valid in thread 0
}

// VEC elements of T per 16-byte load (VEC = 1: scalar fallback for unaligned rows).
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Pack {
  T v[VEC];
};

// Runs use(p, pack) for this thread's packs p = threadIdx.x + k * blockDim.x < packs of `packs_in`, kUnroll of them
// loaded before any is used (bytes in flight for a memory-bound pass).
template <int kUnroll, typename P, typename Use>
__device__ __forceinline__ void for_each_pack(const P* packs_in, int64_t packs, Use&& use) {
  for (int64_t p0 = threadIdx.x; p0 < packs; p0 += kUnroll * static_cast<int64_t>(blockDim.x)) {
    P pk[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t p = p0 + u * static_cast<int64_t>(blockDim.x);
      if (p < packs) pk[u] = packs_in[p];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t p = p0 + u * static_cast<int64_t>(blockDim.x);
      if (p >= packs) break;
      use(p, pk[u]);
    }
  }
}

constexpr float kLog2e = 1.4426950408889634f;

// 2^x by the SFU, subnormal results flushed to zero (terms below 2^-126 of a row's largest do not move its sum).
// __expf compiles to the non-flushing ex2.approx.f32, which costs several more instructions per element around it.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// The pack's values as fp32, columns >= valid_cols as -inf. Every pack but a row's last (padding) ones is whole: its
// conversion has no per-element test (a 64-bit compare and a branch per element otherwise, most of the pass's
// instructions).
template <typename T, int VEC>
__device__ __forceinline__ void unpack(const Pack<T, VEC>& pk, int64_t first, int64_t valid_cols, float (&x)[VEC]) {
  if (first + VEC <= valid_cols) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) x[k] = to_float(pk.v[k]);
  } else {
#pragma unroll
    for (int k = 0; k < VEC; ++k) x[k] = first + k < valid_cols ? to_float(pk.v[k]) : -INFINITY;
  }
}

// Joins a pack of the row (its first column `first`; columns >= valid_cols count as -inf) to acc, one exponential
// per element: the terms are taken against acc's running max, raised (one rescale of acc.s) only when the pack holds
// a larger value, which after a row's first packs is rare. (Joining each pack as its own (max, sum) pair costs 2 more
// per pack.) exp(x - m) = 2^(x log2(e) - m log2(e)): one FMA and the SFU's exp2 per element.
template <typename T, int VEC>
__device__ __forceinline__ void join_pack(MaxSum& acc, const Pack<T, VEC>& pk, int64_t first, int64_t valid_cols) {
  float x[VEC];
  unpack(pk, first, valid_cols, x);
  float m = acc.m;
#pragma unroll
  for (int k = 0; k < VEC; ++k) m = fmaxf(m, x[k]);
  if (m == -INFINITY) return;  // nothing but -inf so far
  if (m > acc.m) {
    acc.s *= exp2_ftz((acc.m - m) * kLog2e);  // 0 for the first finite value (acc.m = -inf)
    acc.m = m;
  }
  const float ml = m * kLog2e;
  float e = 0.f;
#pragma unroll
  for (int k = 0; k < VEC; ++k) e += exp2_ftz(fmaf(x[k], kLog2e, -ml));
  acc.s += e;
}

// The gradient of a pack (its first column `first`): (exp(x - m) / S - [column == t]) * g with ml = m log2(e) and
// scale = g / S; 0 on columns >= valid_cols. Packs that are whole and do not hold the target (all but one or two of a
// row's) take no per-element test.
template <typename T, int VEC>
__device__ __forceinline__ Pack<T, VEC> grad_pack(const Pack<T, VEC>& in, int64_t first, int64_t valid_cols, int64_t t,
                                                  float ml, float scale, float g) {
  Pack<T, VEC> o;
  if (first + VEC <= valid_cols && (t < first || t >= first + VEC)) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) o.v[k] = from_float<T>(exp2_ftz(fmaf(to_float(in.v[k]), kLog2e, -ml)) * scale);
    return o;
  }
#pragma unroll
  for (int k = 0; k < VEC; ++k) {
    const int64_t c = first + k;
    const float q = c < valid_cols ? exp2_ftz(fmaf(to_float(in.v[k]), kLog2e, -ml)) * scale : 0.f;
    o.v[k] = from_float<T>(c == t ? q - g : q);
  }
  return o;
}

template <typename T, int VEC>
__global__ void __launch_bounds__(kThreads)
    row_stats_kernel(const T* __restrict__ logits, int64_t cols, int64_t valid_cols, const int64_t* __restrict__ target,
                     int64_t start, float* __restrict__ row_max, float* __restrict__ row_sum,
                     float* __restrict__ target_logit) {
  const int64_t r = blockIdx.x;
  const T* row = logits + r * cols;
  MaxSum acc{-INFINITY, 0.f};
  const int64_t packs = valid_cols / VEC;
  const auto* rp = reinterpret_cast<const Pack<T, VEC>*>(row);
  for_each_pack<4>(rp, packs, [&](int64_t p, const Pack<T, VEC>& pk) { join_pack(acc, pk, p * VEC, valid_cols); });
  for (int64_t c = packs * VEC + threadIdx.x; c < valid_cols; c += blockDim.x) add(acc, to_float(row[c]));
  acc = block_reduce(acc);
  if (threadIdx.x == 0) {
    row_max[r] = acc.m;
    row_sum[r] = acc.s;
    const int64_t t = target[r] - start;
    target_logit[r] = (t >= 0 && t < valid_cols) ? to_float(row[t]) : 0.f;
  }
}

// grad may be logits itself (in place: each element is read and then written by one thread); grad_loss null: 1.
template <typename T, int VEC>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(const T* logits, T* grad, int64_t cols, int64_t valid_cols, const int64_t* __restrict__ target,
                    int64_t start, const float* __restrict__ global_max, const float* __restrict__ inv_sum,
                    const float* __restrict__ grad_loss) {
  const int64_t r = blockIdx.x;
  const T* row = logits + r * cols;
  T* out = grad + r * cols;
  const float g = grad_loss ? grad_loss[r] : 1.f, ml = global_max[r] * kLog2e, scale = inv_sum[r] * g;
  const int64_t t = target[r] - start;
  const int64_t packs = cols / VEC;
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    const Pack<T, VEC> in = reinterpret_cast<const Pack<T, VEC>*>(row)[p];
    reinterpret_cast<Pack<T, VEC>*>(out)[p] = grad_pack(in, p * VEC, valid_cols, t, ml, scale, g);
  }
  for (int64_t c = packs * VEC + threadIdx.x; c < cols; c += blockDim.x) {
    const Pack<T, 1> in{{row[c]}};
    out[c] = grad_pack(in, c, valid_cols, t, ml, scale, g).v[0];
  }
}

// G = softmax - one_hot(target) for the packs [first, first + n) of a row, read from `packs` (shared or global memory)
// and written to `out`; this thread's packs only.
template <typename T, int VEC>
__device__ __forceinline__ void write_grad(const Pack<T, VEC>* packs, Pack<T, VEC>* out, int64_t n, int64_t first,
                                           int64_t valid_cols, int64_t t, float m, float inv) {
  const float ml = m * kLog2e;
  for (int64_t p = threadIdx.x; p < n; p += blockDim.x)
    out[p] = grad_pack(packs[p], (first + p) * VEC, valid_cols, t, ml, inv, 1.f);
}

// The end of a one-block row (acc valid in thread 0 after block_reduce): thread 0 writes the row's loss, the target's
// logit read from `packs`, and the block's threads write the gradient of the n packs from `packs` over `out`.
template <typename T, int VEC>
__device__ __forceinline__ void finish_row(MaxSum acc, const Pack<T, VEC>* packs, Pack<T, VEC>* out, int64_t n,
                                           int64_t valid_cols, int64_t t, float* loss) {
  __shared__ float stats[2];  // max, 1 / sum
  if (threadIdx.x == 0) {
    const float xt = (t >= 0 && t < valid_cols) ? to_float(packs[t / VEC].v[t % VEC]) : 0.f;
    *loss = logf(acc.s) + acc.m - xt;
    stats[0] = acc.m;
    stats[1] = 1.f / acc.s;
  }
  __syncthreads();
  write_grad(packs, out, n, 0, valid_cols, t, stats[0], stats[1]);
}

// One TP rank holding the whole vocabulary, a row in shared memory: the row is read once from global memory (its packs
// stored to shared memory and joined to the (max, sum) as row_stats_kernel does), the loss written, and the gradient
// softmax - one_hot(target) written over the logits from the shared copy. Requires 16-byte aligned rows (cols % VEC
// == 0) and cols * sizeof(T) bytes of dynamic shared memory.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    loss_grad_kernel(T* logits, int64_t cols, int64_t valid_cols, const int64_t* __restrict__ target,
                     float* __restrict__ loss) {
  constexpr int VEC = 16 / sizeof(T);
  extern __shared__ __align__(16) unsigned char smem[];
  auto* srow = reinterpret_cast<Pack<T, VEC>*>(smem);  // [cols / VEC]
  const int64_t r = blockIdx.x;
  auto* row = reinterpret_cast<Pack<T, VEC>*>(logits + r * cols);
  const int64_t packs = cols / VEC;
  MaxSum acc{-INFINITY, 0.f};
  for_each_pack<4>(row, packs, [&](int64_t p, const Pack<T, VEC>& pk) {
    srow[p] = pk;
    join_pack(acc, pk, p * VEC, valid_cols);  // padding columns count as -inf
  });
  acc = block_reduce(acc);  // its __syncthreads orders every thread's shared-memory stores before the reads below
  finish_row(acc, srow, row, packs, valid_cols, target[r], loss + r);
}

// loss_grad_kernel with a row split over a cluster of kCluster blocks (sm_90): each block keeps its slice of the row in
// its shared memory, the blocks' (max, sum) pairs meet through distributed shared memory, and each block writes the
// gradient of its slice. Smaller blocks with less shared memory each, so more of them share an SM and one block's
// loads overlap another's stores.
template <typename T, int kCluster>
__global__ void __launch_bounds__(kClusterThreads)
    loss_grad_cluster_kernel(T* logits, int64_t cols, int64_t valid_cols, const int64_t* __restrict__ target,
                             float* __restrict__ loss) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  constexpr int VEC = 16 / sizeof(T);
  extern __shared__ __align__(16) unsigned char smem[];
  auto* slice = reinterpret_cast<Pack<T, VEC>*>(smem);  // [per]
  __shared__ MaxSum part;
  __shared__ float stats[2];  // max, 1 / sum
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int64_t r = blockIdx.x / kCluster;
  const int64_t packs = cols / VEC, per = (packs + kCluster - 1) / kCluster, first = rank * per;
  const int64_t mine = first >= packs ? 0 : (packs - first < per ? packs - first : per);
  auto* row = reinterpret_cast<Pack<T, VEC>*>(logits + r * cols) + first;
  MaxSum acc{-INFINITY, 0.f};
  for_each_pack<4>(row, mine, [&](int64_t p, const Pack<T, VEC>& pk) {
    slice[p] = pk;
    join_pack(acc, pk, (first + p) * VEC, valid_cols);
  });
  acc = block_reduce(acc);
  if (threadIdx.x == 0) part = acc;
  cluster.sync();  // every block's pair and slice visible to the cluster
  const int64_t t = target[r];
  if (threadIdx.x == 0) {
    MaxSum all{-INFINITY, 0.f};
    for (int k = 0; k < kCluster; ++k) all = combine(all, *cluster.map_shared_rank(&part, k));
    stats[0] = all.m;
    stats[1] = 1.f / all.s;
    if (rank == 0) {
      float xt = 0.f;
      if (t >= 0 && t < valid_cols) {
        const int64_t tp = t / VEC;
        const int owner = static_cast<int>(tp / per);
        xt = to_float(cluster.map_shared_rank(slice, owner)[tp - owner * per].v[t % VEC]);
      }
      loss[r] = logf(all.s) + all.m - xt;
    }
  }
  cluster.sync();  // the remote reads are done before any block moves on; stats visible to the block
  write_grad(slice, row, mine, first, valid_cols, t, stats[0], stats[1]);
#endif
}

// The row read twice from global memory, the second time (right after the first, by the same block) mostly from L2,
// and no shared-memory row: blocks of kL2Threads.
template <typename T>
__global__ void __launch_bounds__(kL2Threads)
    loss_grad_l2_kernel(T* logits, int64_t cols, int64_t valid_cols, const int64_t* __restrict__ target,
                        float* __restrict__ loss) {
  constexpr int VEC = 16 / sizeof(T);
  const int64_t r = blockIdx.x;
  auto* row = reinterpret_cast<Pack<T, VEC>*>(logits + r * cols);
  const int64_t packs = cols / VEC;
  MaxSum acc{-INFINITY, 0.f};
  for_each_pack<4>(row, packs, [&](int64_t p, const Pack<T, VEC>& pk) { join_pack(acc, pk, p * VEC, valid_cols); });
  acc = block_reduce(acc);
  finish_row(acc, row, row, packs, valid_cols, target[r], loss + r);
}

// scale_rows: one pack of VEC elements per thread and grid-stride step; the row of a pack is its index over the packs
// per row (a 64-bit division per 16 bytes: the pass stays bound by memory). out may be x: no __restrict__ on either.
template <typename T, int VEC>
__global__ void __launch_bounds__(256) scale_rows_kernel(const Pack<T, VEC>* x, Pack<T, VEC>* out, int64_t packs,
                                                         int64_t packs_per_row, const float* __restrict__ scale) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < packs; p += stride) {
    const float g = scale[p / packs_per_row];
    const Pack<T, VEC> in = x[p];
    Pack<T, VEC> o;
#pragma unroll
    for (int k = 0; k < VEC; ++k) o.v[k] = from_float<T>(to_float(in.v[k]) * g);
    out[p] = o;
  }
}

bool aligned16(const void* p, int64_t cols, int elem) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && (cols * elem) % 16 == 0;
}

template <typename T>
void launch_stats(const void* logits, int64_t rows, int64_t cols, int64_t valid_cols, const int64_t* target,
                  int64_t start, float* mx, float* sm, float* tl, cudaStream_t s) {
  const auto* x = static_cast<const T*>(logits);
  constexpr int kVec = 16 / sizeof(T);
  if (aligned16(logits, cols, sizeof(T)))
    row_stats_kernel<T, kVec><<<rows, kThreads, 0, s>>>(x, cols, valid_cols, target, start, mx, sm, tl);
  else
    row_stats_kernel<T, 1><<<rows, kThreads, 0, s>>>(x, cols, valid_cols, target, start, mx, sm, tl);
  check(cudaGetLastError(), "cross_entropy_row_stats launch");
}

template <typename T>
void launch_backward(const void* logits, void* grad, int64_t rows, int64_t cols, int64_t valid_cols,
                     const int64_t* target, int64_t start, const float* m, const float* inv, const float* g,
                     cudaStream_t s) {
  const auto* x = static_cast<const T*>(logits);
  auto* o = static_cast<T*>(grad);
  constexpr int kVec = 16 / sizeof(T);
  if (aligned16(logits, cols, sizeof(T)) && aligned16(grad, cols, sizeof(T)))
    backward_kernel<T, kVec><<<rows, kThreads, 0, s>>>(x, o, cols, valid_cols, target, start, m, inv, g);
  else
    backward_kernel<T, 1><<<rows, kThreads, 0, s>>>(x, o, cols, valid_cols, target, start, m, inv, g);
  check(cudaGetLastError(), "cross_entropy_backward launch");
}

template <typename T>
void launch_scale_rows(const void* x, void* out, int64_t rows, int64_t cols, const float* scale, cudaStream_t s) {
  constexpr int kVec = 16 / sizeof(T), kBlock = 256;
  auto grid = [](int64_t packs) {  // a pack per thread up to 2^19 blocks, then grid stride
    return static_cast<unsigned>(std::min<int64_t>((packs + kBlock - 1) / kBlock, int64_t{1} << 19));
  };
  if (aligned16(x, cols, sizeof(T)) && aligned16(out, cols, sizeof(T))) {
    const int64_t per_row = cols / kVec;
    scale_rows_kernel<T, kVec><<<grid(rows * per_row), kBlock, 0, s>>>(
        static_cast<const Pack<T, kVec>*>(x), static_cast<Pack<T, kVec>*>(out), rows * per_row, per_row, scale);
  } else {
    scale_rows_kernel<T, 1><<<grid(rows * cols), kBlock, 0, s>>>(
        static_cast<const Pack<T, 1>*>(x), static_cast<Pack<T, 1>*>(out), rows * cols, cols, scale);
  }
  check(cudaGetLastError(), "scale_rows launch");
}

constexpr int64_t kStaticSmem = 1024;  // block_reduce's per-warp pairs and the row's statistics, with room

template <typename K>
void allow_smem(K kernel, int64_t bytes) {
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
        "cross_entropy_loss_grad shared memory");
}

template <typename T>
bool launch_shared_row(T* logits, int64_t rows, int64_t cols, int64_t valid, const int64_t* target, float* loss,
                       cudaStream_t s) {
  const int64_t smem = cols * static_cast<int64_t>(sizeof(T));
  if (smem + kStaticSmem > optin_smem()) return false;
  allow_smem(loss_grad_kernel<T>, smem);
  loss_grad_kernel<T><<<rows, kThreads, smem, s>>>(logits, cols, valid, target, loss);
  return true;
}

template <typename T, int kCluster>
bool launch_cluster(T* logits, int64_t rows, int64_t cols, int64_t valid, const int64_t* target, float* loss,
                    cudaStream_t s) {
  int device = 0, major = 0;
  cudaFuncAttributes fa{};
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess || major < 9 ||
      cudaFuncGetAttributes(&fa, loss_grad_cluster_kernel<T, kCluster>) != cudaSuccess || fa.binaryVersion < 90)
    return false;  // clusters need sm_90 hardware and code
  constexpr int64_t VEC = 16 / sizeof(T);
  const int64_t per = (cols / VEC + kCluster - 1) / kCluster, smem = per * 16;
  if (smem + kStaticSmem > optin_smem()) return false;
  allow_smem(loss_grad_cluster_kernel<T, kCluster>, smem);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(rows * kCluster));
  cfg.blockDim = dim3(kClusterThreads);
  cfg.dynamicSmemBytes = static_cast<size_t>(smem);
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = kCluster;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  check(cudaLaunchKernelEx(&cfg, loss_grad_cluster_kernel<T, kCluster>, logits, cols, valid, target, loss),
        "cross_entropy_loss_grad cluster launch");
  return true;
}

template <typename T>
bool launch_loss_grad(void* logits_v, int64_t rows, int64_t cols, int64_t valid, const int64_t* target, float* loss,
                      LossGradVariant v, cudaStream_t s) {
  if (!aligned16(logits_v, cols, sizeof(T))) return false;
  T* logits = static_cast<T*>(logits_v);
  bool launched = false;
  switch (v) {
    case LossGradVariant::kSharedRow:
      launched = launch_shared_row(logits, rows, cols, valid, target, loss, s);
      break;
    case LossGradVariant::kCluster4:
      launched = launch_cluster<T, 4>(logits, rows, cols, valid, target, loss, s);
      break;
    case LossGradVariant::kCluster8:
      launched = launch_cluster<T, 8>(logits, rows, cols, valid, target, loss, s);
      break;
    case LossGradVariant::kL2:
      loss_grad_l2_kernel<T><<<rows, kL2Threads, 0, s>>>(logits, cols, valid, target, loss);
      launched = true;
      break;
  }
  if (launched) check(cudaGetLastError(), "cross_entropy_loss_grad launch");
  return launched;
}

}  // namespace

bool cross_entropy_loss_grad(void* logits, FloatType type, int64_t rows, int64_t cols, int64_t valid_cols,
                             const int64_t* target, float* loss, cudaStream_t stream, LossGradVariant variant) {
  if (rows == 0) return true;
  switch (type) {
    case FloatType::kFloat32:
      return launch_loss_grad<float>(logits, rows, cols, valid_cols, target, loss, variant, stream);
    case FloatType::kBFloat16:
      return launch_loss_grad<__nv_bfloat16>(logits, rows, cols, valid_cols, target, loss, variant, stream);
    case FloatType::kFloat16:
      return launch_loss_grad<__half>(logits, rows, cols, valid_cols, target, loss, variant, stream);
  }
  return false;
}

void cross_entropy_row_stats(const void* logits, FloatType type, int64_t rows, int64_t cols, int64_t valid_cols,
                             const int64_t* target, int64_t start, float* row_max, float* row_sum, float* target_logit,
                             cudaStream_t stream) {
  if (rows == 0) return;
  switch (type) {
    case FloatType::kFloat32:
      return launch_stats<float>(logits, rows, cols, valid_cols, target, start, row_max, row_sum, target_logit, stream);
    case FloatType::kBFloat16:
      return launch_stats<__nv_bfloat16>(logits, rows, cols, valid_cols, target, start, row_max, row_sum, target_logit,
                                         stream);
    case FloatType::kFloat16:
      return launch_stats<__half>(logits, rows, cols, valid_cols, target, start, row_max, row_sum, target_logit,
                                  stream);
  }
}

void cross_entropy_backward(const void* logits, void* grad, FloatType type, int64_t rows, int64_t cols,
                            int64_t valid_cols, const int64_t* target, int64_t start, const float* global_max,
                            const float* inv_sum, const float* grad_loss, cudaStream_t stream) {
  if (rows == 0) return;
  switch (type) {
    case FloatType::kFloat32:
      return launch_backward<float>(logits, grad, rows, cols, valid_cols, target, start, global_max, inv_sum, grad_loss,
                                    stream);
    case FloatType::kBFloat16:
      return launch_backward<__nv_bfloat16>(logits, grad, rows, cols, valid_cols, target, start, global_max, inv_sum,
                                            grad_loss, stream);
    case FloatType::kFloat16:
      return launch_backward<__half>(logits, grad, rows, cols, valid_cols, target, start, global_max, inv_sum,
                                     grad_loss, stream);
  }
}

void scale_rows(const void* x, void* out, FloatType type, int64_t rows, int64_t cols, const float* scale,
                cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  switch (type) {
    case FloatType::kFloat32:
      return launch_scale_rows<float>(x, out, rows, cols, scale, stream);
    case FloatType::kBFloat16:
      return launch_scale_rows<__nv_bfloat16>(x, out, rows, cols, scale, stream);
    case FloatType::kFloat16:
      return launch_scale_rows<__half>(x, out, rows, cols, scale, stream);
  }
}

}  // namespace megaton::kernels
