#include <algorithm>
#include <stdexcept>
#include <string>

#include "column_sum_partials.cuh"
#include "fp8_cast_dbias_kernels.h"
#include "fp8_device.cuh"
#include "gelu_math.cuh"
#include "kernel_util.cuh"

namespace megaton::kernels {

namespace {

using fp8_device::block_max_to;
using fp8_device::to_fp8;
using util::from_float;
using util::to_float;

constexpr int kTile = 64;        // a block walks 64 x 64 tiles down one strip of 64 columns
constexpr int kThreads = 256;    // thread t: rows t / 8 and t / 8 + 32 of a tile, its columns (t % 8) * 8 .. + 7
constexpr int kBlocksPerSm = 4;  // the grid: about this many blocks per SM

template <typename T>
union Pack8 {
  uint4 v;
  T x[8];
};

// grid (cols / 64 column strips, `partials` row groups); block (256). Block (cx, ry) casts the tiles of strip cx in
// rows ry, ry + gridDim.y, ... and, with kSums, writes its strip's column sums to partial[ry, cx 64 .. + 63].
template <typename T, Fp8Type F, bool kGelu, bool kSums>
__global__ void __launch_bounds__(kThreads)
    cast_dbias_kernel(const T* __restrict__ dy, const T* __restrict__ pre, int64_t rows, int64_t cols,
                      const float* __restrict__ scale, uint8_t* __restrict__ out, uint8_t* __restrict__ out_t,
                      float* __restrict__ amax, float* __restrict__ partial) {
  static_assert(sizeof(T) == 2, "8 elements per 16-byte load");
  __shared__ __align__(16) uint8_t tile[kTile][kTile + 16];  // [row][col] FP8 bytes
  __shared__ float sums[kThreads / 8][kTile + 1];            // [row lane][col]: the threads' column sums
  const float s = *scale;
  const int t = threadIdx.x;
  const int lr = t / 8, lc = (t % 8) * 8;
  const int64_t c0 = int64_t(blockIdx.x) * kTile;
  float acc[8] = {};
  float local_max = 0.0f;
  for (int64_t rt = blockIdx.y; rt < rows / kTile; rt += gridDim.y) {
    const int64_t r0 = rt * kTile;
    // Both rows' loads issued before either is used (more bytes in flight per thread).
    Pack8<T> g[2], x[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t at = (r0 + lr + 32 * half) * cols + c0 + lc;
      g[half].v = *reinterpret_cast<const uint4*>(dy + at);
      if constexpr (kGelu) x[half].v = *reinterpret_cast<const uint4*>(pre + at);
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = lr + 32 * half;
      union {
        uint2 v;
        uint8_t b[8];
      } q;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        float v = to_float(g[half].x[j]);
        // (rounded to the element type first: the d_pre the unfused path writes and then casts)
        if constexpr (kGelu) v = to_float(from_float<T>(util::gelu_tanh_grad(v, to_float(x[half].x[j]))));
        if constexpr (kSums) acc[j] += v;
        local_max = fmaxf(local_max, fabsf(v));
        q.b[j] = to_fp8<F>(v * s);
      }
      *reinterpret_cast<uint2*>(out + (r0 + r) * cols + c0 + lc) = q.v;
      *reinterpret_cast<uint2*>(&tile[r][lc]) = q.v;
    }
    fp8_device::write_tile_transposed(tile, out_t, rows, r0, c0);
  }
  if constexpr (kSums) {
#pragma unroll
    for (int j = 0; j < 8; ++j) sums[lr][lc + j] = acc[j];
    __syncthreads();
    if (t < kTile) {
      float v = 0.0f;
      for (int y = 0; y < kThreads / 8; ++y) v += sums[y][t];
      partial[int64_t(blockIdx.y) * cols + c0 + t] = v;
    }
  }
  block_max_to(amax, local_max);
}

template <typename T, Fp8Type F, bool kGelu>
void launch(const void* dy, const void* pre, int64_t rows, int64_t cols, const float* scale, uint8_t* out,
            uint8_t* out_t, float* amax, const ColumnSumOut& db, float* workspace, int64_t partials,
            cudaStream_t stream) {
  const bool sums = db.out != nullptr || db.main != nullptr;
  const dim3 grid(unsigned(cols / kTile), unsigned(partials));
  const T* g = static_cast<const T*>(dy);
  const T* x = static_cast<const T*>(pre);
  if (sums)
    cast_dbias_kernel<T, F, kGelu, true>
        <<<grid, kThreads, 0, stream>>>(g, x, rows, cols, scale, out, out_t, amax, workspace);
  else
    cast_dbias_kernel<T, F, kGelu, false>
        <<<grid, kThreads, 0, stream>>>(g, x, rows, cols, scale, out, out_t, amax, nullptr);
  util::check(cudaGetLastError(), "cast_to_fp8_dbias launch");
  if (sums) util::launch_sum_partials<T>(workspace, partials, cols, db, stream);
}

template <typename T>
void dispatch(bool gelu, Fp8Type type, const void* dy, const void* pre, int64_t rows, int64_t cols, const float* scale,
              uint8_t* out, uint8_t* out_t, float* amax, const ColumnSumOut& db, float* workspace, int64_t partials,
              cudaStream_t stream) {
  const bool e4m3 = type == Fp8Type::kE4M3;
  if (gelu && e4m3)
    launch<T, Fp8Type::kE4M3, true>(dy, pre, rows, cols, scale, out, out_t, amax, db, workspace, partials, stream);
  else if (gelu)
    launch<T, Fp8Type::kE5M2, true>(dy, pre, rows, cols, scale, out, out_t, amax, db, workspace, partials, stream);
  else if (e4m3)
    launch<T, Fp8Type::kE4M3, false>(dy, pre, rows, cols, scale, out, out_t, amax, db, workspace, partials, stream);
  else
    launch<T, Fp8Type::kE5M2, false>(dy, pre, rows, cols, scale, out, out_t, amax, db, workspace, partials, stream);
}

}  // namespace

bool cast_to_fp8_dbias_takes(int64_t rows, int64_t cols) {
  return rows > 0 && cols > 0 && rows % kTile == 0 && cols % kTile == 0 && cols / kTile <= 65535;
}

int64_t cast_to_fp8_dbias_partials(int64_t rows, int64_t cols) {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || sms <= 0)
    sms = 132;
  const int64_t strips = std::max<int64_t>(cols / kTile, 1), row_tiles = std::max<int64_t>(rows / kTile, 1);
  const int64_t want = (int64_t{kBlocksPerSm} * sms + strips / 2) / strips;
  return std::clamp<int64_t>(want, 1, std::min<int64_t>(row_tiles, 65535));
}

void cast_to_fp8_dbias(const void* dy, const void* gelu_pre, FloatType in_type, int64_t rows, int64_t cols,
                       const float* scale, Fp8Type type, uint8_t* out, uint8_t* out_t, float* amax,
                       const ColumnSumOut& db, float* workspace, int64_t partials, cudaStream_t stream) {
  if (!cast_to_fp8_dbias_takes(rows, cols))
    throw std::invalid_argument("cast_to_fp8_dbias: rows " + std::to_string(rows) + ", cols " + std::to_string(cols) +
                                " (positive multiples of 64)");
  const bool sums = db.out != nullptr || db.main != nullptr;
  if (partials < 1 || partials > 65535 || (sums && workspace == nullptr))
    throw std::invalid_argument(
        "cast_to_fp8_dbias: 1..65535 row groups, and with column sums a workspace of as many "
        "partial rows");
  if (!util::aligned16(dy) || (gelu_pre != nullptr && !util::aligned16(gelu_pre)) || !util::aligned16(out) ||
      !util::aligned16(out_t) || amax == nullptr)
    throw std::invalid_argument("cast_to_fp8_dbias: dy, gelu_pre, out and out_t must be 16-byte aligned; amax given");
  const bool gelu = gelu_pre != nullptr;
  switch (in_type) {
    case FloatType::kBFloat16:
      return dispatch<__nv_bfloat16>(gelu, type, dy, gelu_pre, rows, cols, scale, out, out_t, amax, db, workspace,
                                     partials, stream);
    case FloatType::kFloat16:
      return dispatch<__half>(gelu, type, dy, gelu_pre, rows, cols, scale, out, out_t, amax, db, workspace, partials,
                              stream);
    case FloatType::kFloat32:
      break;
  }
  throw std::invalid_argument("cast_to_fp8_dbias: bf16 or fp16 input, not fp32");
}

}  // namespace megaton::kernels
