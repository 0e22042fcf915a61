#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <array>
#include <stdexcept>
#include <string>

#include "column_sum_partials.cuh"
#include "gelu_bias_grad_kernels.h"
#include "gelu_math.cuh"
#include "kernel_util.cuh"

namespace megaton::kernels {

namespace {

using util::aligned16;
using util::from_float;
using util::gelu_tanh_grad;
using util::to_float;

constexpr int kVec = 8;          // elements per 16-byte load
constexpr int kColThreads = 32;  // threadIdx.x: a warp spans 32 * 8 = 256 columns of one row
constexpr int kRowThreads = 8;   // threadIdx.y: rows handled side by side
constexpr int kBlockCols = kColThreads * kVec;

template <typename T>
struct alignas(16) Pack {
  T v[kVec];
};

// The plain column sum (a linear layer's bias gradient): 8 rows per thread loaded before use, 2 blocks per SM.
constexpr int kSumRows = 8;
constexpr int kSumBlocksPerSm = kBiasGradBlocksPerSm;
// The QKV interleave (a load and a store per element, as the GELU's two loads and a store): the GELU's default.
constexpr int kInterleaveRows = 4;
constexpr int kInterleaveBlocksPerSm = kBiasGradBlocksPerSm;  // the partials callers size for bias_grad

// What bias_grad_kernel does with the rows it reads.
enum class Mode {
  kSum,         // sum d_act's columns (a linear layer's bias gradient)
  kGelu,        // d_pre = gelu_tanh'(pre) * d_act, written and summed
  kInterleave,  // gather columns from three [rows, cols / 3] tensors (dq, dk, dv) into out [rows, cols], heads of
                // [3, d]: out[r, h 3d + p d + j] = part_p[r, h d + j]; written and summed (the QKV bias gradient)
};

// grid (column blocks of 256, row blocks); block (32, 8). Block (cx, ry) handles columns [cx * 256, +256) of the
// rows r = ry * 8 + ty + k * stride (stride = gridDim.y * 8), U of them per pass, all loaded before any is used;
// writes its column sums to partial[ry, cols]. kBlocks: __launch_bounds__'s minimum blocks per SM (registers per
// thread <= 65536 / (256 kBlocks)): more blocks overlap one warp's arithmetic with other warps' loads, more rows per
// pass keep more bytes in flight per warp (GeluBiasGradTuning).
// kMode (Mode): kSum reads d_act only (pre, d_pre, parts and head_dim unused); kGelu reads d_act and pre and writes
// d_pre; kInterleave reads d_act, dk and dv as dq, dk, dv (pre unused), writes d_pre (the gathered d_qkv).
template <typename T, Mode kMode, int U, int kBlocks>
__global__ void __launch_bounds__(kColThreads* kRowThreads, kBlocks)
    bias_grad_kernel(const T* __restrict__ d_act, const T* __restrict__ pre, T* __restrict__ d_pre,
                     float* __restrict__ partial, int64_t rows, int64_t cols, const T* __restrict__ dk,
                     const T* __restrict__ dv, int64_t head_dim, int64_t stride_q, int64_t stride_k, int64_t stride_v) {
  constexpr bool kGelu = kMode == Mode::kGelu;
  __shared__ float sums[kRowThreads][kBlockCols];
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kBlockCols + threadIdx.x * kVec;
  const int64_t stride = static_cast<int64_t>(gridDim.y) * kRowThreads;
  // Where this thread's 8 columns come from: d_act itself, or (interleave) the part and column they gather from
  // (head_dim % 8 == 0: the 8 stay within one head's part; a part's heads are stride_p >= head_dim apart).
  const T* src = d_act;
  int64_t src_ld = cols, src_col = col;
  if constexpr (kMode == Mode::kInterleave) {
    const int64_t head = col / (3 * head_dim), within = col - head * 3 * head_dim, part = within / head_dim;
    const int64_t head_stride = part == 0 ? stride_q : (part == 1 ? stride_k : stride_v);
    src = part == 0 ? d_act : (part == 1 ? dk : dv);
    src_ld = cols / (3 * head_dim) * head_stride;  // heads * head_stride
    src_col = head * head_stride + within - part * head_dim;
  }
  float acc[kVec] = {};
  if (col < cols) {
    for (int64_t r0 = static_cast<int64_t>(blockIdx.y) * kRowThreads + threadIdx.y; r0 < rows; r0 += stride * U) {
      Pack<T> dy[U], x[kGelu ? U : 1];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t r = r0 + u * stride;
        if (r < rows) {
          dy[u] = *reinterpret_cast<const Pack<T>*>(src + r * src_ld + src_col);
          if constexpr (kGelu) x[u] = *reinterpret_cast<const Pack<T>*>(pre + r * cols + col);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t r = r0 + u * stride;
        if (r >= rows) break;
        if constexpr (kGelu) {
          Pack<T> out;
#pragma unroll
          for (int k = 0; k < kVec; ++k) {
            out.v[k] = from_float<T>(gelu_tanh_grad(to_float(dy[u].v[k]), to_float(x[u].v[k])));
            acc[k] += to_float(out.v[k]);
          }
          *reinterpret_cast<Pack<T>*>(d_pre + r * cols + col) = out;
        } else {
          if constexpr (kMode == Mode::kInterleave) *reinterpret_cast<Pack<T>*>(d_pre + r * cols + col) = dy[u];
#pragma unroll
          for (int k = 0; k < kVec; ++k) acc[k] += to_float(dy[u].v[k]);
        }
      }
    }
  }
#pragma unroll
  for (int k = 0; k < kVec; ++k) sums[threadIdx.y][threadIdx.x * kVec + k] = acc[k];
  __syncthreads();
  // 256 threads, 256 columns: thread i sums column i over the 8 row lanes in a fixed order.
  const int i = threadIdx.y * kColThreads + threadIdx.x;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kBlockCols + i;
  if (c < cols) {
    float s = 0.0f;
#pragma unroll
    for (int y = 0; y < kRowThreads; ++y) s += sums[y][i];
    partial[static_cast<int64_t>(blockIdx.y) * cols + c] = s;
  }
}

// The interleave's other two parts (dk, dv), the head size and each part's head stride; unused by the other modes.
struct Parts {
  const void* dk = nullptr;
  const void* dv = nullptr;
  int64_t head_dim = 0;
  std::array<int64_t, 3> head_strides{};
};

template <typename T, Mode kMode, int U, int kBlocks>
void launch(const void* d_act, const void* pre, void* d_pre, const ColumnSumOut& db, float* workspace, int64_t partials,
            int64_t rows, int64_t cols, cudaStream_t stream, const Parts& parts = {}) {
  const dim3 grid(static_cast<unsigned>((cols + kBlockCols - 1) / kBlockCols), static_cast<unsigned>(partials));
  const dim3 block(kColThreads, kRowThreads);
  bias_grad_kernel<T, kMode, U, kBlocks><<<grid, block, 0, stream>>>(
      static_cast<const T*>(d_act), static_cast<const T*>(pre), static_cast<T*>(d_pre), workspace, rows, cols,
      static_cast<const T*>(parts.dk), static_cast<const T*>(parts.dv), parts.head_dim, parts.head_strides[0],
      parts.head_strides[1], parts.head_strides[2]);
  util::check(cudaGetLastError(), kMode == Mode::kGelu         ? "gelu_backward_bias_grad launch"
                                  : kMode == Mode::kInterleave ? "qkv_interleave_bias_grad launch"
                                                               : "bias_grad launch");
  util::launch_sum_partials<T>(workspace, partials, cols, db, stream);
}

// The GELU kernel's compiled (rows in flight, blocks per SM) pairs, as GeluBiasGradTuning names them.
#define MEGATON_GELU_CONFIGS(X) X(4, 2) X(2, 2) X(2, 3) X(4, 3) X(2, 4) X(1, 4) X(1, 5)

template <typename T>
void launch_gelu(const GeluBiasGradTuning& t, const void* d_act, const void* pre, void* d_pre, const ColumnSumOut& db,
                 float* workspace, int64_t partials, int64_t rows, int64_t cols, cudaStream_t stream) {
#define MEGATON_GELU_LAUNCH(R, B)                    \
  if (t.rows_in_flight == R && t.blocks_per_sm == B) \
    return launch<T, Mode::kGelu, R, B>(d_act, pre, d_pre, db, workspace, partials, rows, cols, stream);
  MEGATON_GELU_CONFIGS(MEGATON_GELU_LAUNCH)
#undef MEGATON_GELU_LAUNCH
  throw std::invalid_argument("gelu_backward_bias_grad: no kernel for rows_in_flight " +
                              std::to_string(t.rows_in_flight) + ", blocks_per_sm " + std::to_string(t.blocks_per_sm));
}

// run(T{}) for a bf16/fp16 `type`; fp32 is not vectorised here (the callers use ATen for it).
template <typename Run>
void dispatch_half(const char* what, FloatType type, Run&& run) {
  switch (type) {
    case FloatType::kBFloat16:
      return run(__nv_bfloat16{});
    case FloatType::kFloat16:
      return run(__half{});
    case FloatType::kFloat32:
      break;
  }
  throw std::invalid_argument(std::string(what) + ": fp32 is not taken (use ATen)");
}

void check_shape(const char* what, int64_t rows, int64_t cols, int64_t partials) {
  if (rows <= 0 || cols <= 0 || cols % kVec != 0 || partials < 1 || partials > 65535)
    throw std::invalid_argument(std::string(what) + ": rows " + std::to_string(rows) + ", cols " +
                                std::to_string(cols) + " (a positive multiple of 8), partials " +
                                std::to_string(partials) + " (1..65535)");
}

}  // namespace

std::vector<GeluBiasGradTuning> gelu_bias_grad_tunings() {
#define MEGATON_GELU_TUNING(R, B) GeluBiasGradTuning{R, B},
  return {MEGATON_GELU_CONFIGS(MEGATON_GELU_TUNING)};
#undef MEGATON_GELU_TUNING
}

int64_t gelu_bias_grad_partials(int64_t rows, int64_t cols, int blocks_per_sm) {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || sms <= 0)
    sms = 108;
  const int64_t col_blocks = (cols + kBlockCols - 1) / kBlockCols;
  // One wave: as many blocks as are resident at once (blocks_per_sm per SM), so no SM idles through a tail.
  const int64_t resident = int64_t{blocks_per_sm < 1 ? 1 : blocks_per_sm} * sms;
  const int64_t want = (resident + col_blocks / 2) / col_blocks;
  const int64_t row_groups = (rows + kRowThreads - 1) / kRowThreads;
  const int64_t p = want < row_groups ? want : row_groups;
  return p < 1 ? 1 : (p > 65535 ? 65535 : p);
}

void gelu_backward_bias_grad(const void* d_act, const void* pre, void* d_pre, const ColumnSumOut& db, float* workspace,
                             int64_t partials, FloatType type, int64_t rows, int64_t cols, cudaStream_t stream,
                             const GeluBiasGradTuning& tuning) {
  check_shape("gelu_backward_bias_grad", rows, cols, partials);
  if (!aligned16(d_act) || !aligned16(pre) || !aligned16(d_pre))
    throw std::invalid_argument("gelu_backward_bias_grad: d_act, pre and d_pre must be 16-byte aligned");
  dispatch_half("gelu_backward_bias_grad", type, [&](auto zero) {
    launch_gelu<decltype(zero)>(tuning, d_act, pre, d_pre, db, workspace, partials, rows, cols, stream);
  });
}

void bias_grad(const void* dy, const ColumnSumOut& db, float* workspace, int64_t partials, FloatType type, int64_t rows,
               int64_t cols, cudaStream_t stream) {
  check_shape("bias_grad", rows, cols, partials);
  if (!aligned16(dy)) throw std::invalid_argument("bias_grad: dy must be 16-byte aligned");
  dispatch_half("bias_grad", type, [&](auto zero) {
    launch<decltype(zero), Mode::kSum, kSumRows, kSumBlocksPerSm>(dy, nullptr, nullptr, db, workspace, partials, rows,
                                                                  cols, stream);
  });
}

void qkv_interleave_bias_grad(const void* dq, const void* dk, const void* dv, void* d_qkv, const ColumnSumOut& db,
                              float* workspace, int64_t partials, FloatType type, int64_t rows, int64_t heads,
                              int64_t head_dim, cudaStream_t stream, const std::array<int64_t, 3>& head_strides) {
  const int64_t cols = 3 * heads * head_dim;
  check_shape("qkv_interleave_bias_grad", rows, cols, partials);
  if (heads <= 0 || head_dim <= 0 || head_dim % kVec != 0)
    throw std::invalid_argument("qkv_interleave_bias_grad: heads " + std::to_string(heads) + ", head_dim " +
                                std::to_string(head_dim) + " (a positive multiple of 8)");
  std::array<int64_t, 3> strides = head_strides;
  for (int64_t& st : strides) {
    if (st == 0) st = head_dim;
    if (st < head_dim || st % kVec != 0)
      throw std::invalid_argument("qkv_interleave_bias_grad: head stride " + std::to_string(st) + " for head_dim " +
                                  std::to_string(head_dim) + " (a multiple of 8, >= head_dim)");
  }
  if (!aligned16(dq) || !aligned16(dk) || !aligned16(dv) || !aligned16(d_qkv))
    throw std::invalid_argument("qkv_interleave_bias_grad: dq, dk, dv and d_qkv must be 16-byte aligned");
  dispatch_half("qkv_interleave_bias_grad", type, [&](auto zero) {
    launch<decltype(zero), Mode::kInterleave, kInterleaveRows, kInterleaveBlocksPerSm>(
        dq, nullptr, d_qkv, db, workspace, partials, rows, cols, stream, Parts{dk, dv, head_dim, strides});
  });
}

}  // namespace megaton::kernels
