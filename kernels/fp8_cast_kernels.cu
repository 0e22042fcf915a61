#include <algorithm>

#include "fp8_cast_kernels.h"
#include "fp8_device.cuh"
#include "kernel_util.cuh"

namespace megaton::kernels {

namespace {

constexpr int kTile = 32;        // a block casts a kTile x kTile tile
constexpr int kRowsPerPass = 8;  // blockDim = (kTile, kRowsPerPass)

using fp8_device::block_max_to;
using fp8_device::to_fp8;

template <typename T, Fp8Type F>
__global__ void cast_kernel(const T* __restrict__ in, int64_t rows, int64_t cols, const float* __restrict__ scale,
                            uint8_t* __restrict__ out, uint8_t* __restrict__ out_t, float* __restrict__ amax) {
  __shared__ uint8_t tile[kTile][kTile + 4];  // [row][col] of the block's tile
  const float s = *scale;
  const int64_t r0 = int64_t(blockIdx.y) * kTile, c0 = int64_t(blockIdx.x) * kTile;
  const int64_t c = c0 + threadIdx.x;
  float local_max = 0.0f;
  for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
    const int64_t r = r0 + i;
    if (r < rows && c < cols) {
      const float x = util::to_float(in[r * cols + c]);
      local_max = fmaxf(local_max, fabsf(x));
      const uint8_t q = to_fp8<F>(x * s);
      out[r * cols + c] = q;
      tile[i][threadIdx.x] = q;
    }
  }
  if (out_t != nullptr) {
    __syncthreads();
    // out_t [cols, rows]: thread x walks the tile's rows, so consecutive threads write consecutive bytes.
    const int64_t r = r0 + threadIdx.x;
    for (int j = threadIdx.y; j < kTile; j += kRowsPerPass) {
      const int64_t cc = c0 + j;
      if (r < rows && cc < cols) out_t[cc * rows + r] = tile[threadIdx.x][j];
    }
  }
  if (amax != nullptr) block_max_to(amax, local_max);
}

// 16-bit input, both dimensions multiples of kBig: 64 x 64 tiles, a block of 256 threads striding over them (one
// atomic per block for the amax, not one per warp: they all hit one address), 16-byte loads of 8 elements, 8-byte
// stores of their 8 FP8 bytes, and the transpose's rows written 16 bytes at a time from a shared-memory tile.
constexpr int kBig = 64;
constexpr int kBigThreads = 256;

template <typename T, Fp8Type F>
__global__ void __launch_bounds__(kBigThreads)
    cast_tiles_kernel(const T* __restrict__ in, int64_t rows, int64_t cols, const float* __restrict__ scale,
                      uint8_t* __restrict__ out, uint8_t* __restrict__ out_t, float* __restrict__ amax) {
  static_assert(sizeof(T) == 2, "8 elements per 16-byte load");
  __shared__ __align__(16) uint8_t tile[kBig][kBig + 16];  // [row][col] FP8 bytes
  const float s = *scale;
  const int t = threadIdx.x;
  const int lr = t / 8, lc = (t % 8) * 8;  // the 8 elements a thread casts: row lr (+ 32), columns lc..lc + 7
  const int64_t tiles_c = cols / kBig, tiles = (rows / kBig) * tiles_c;
  float local_max = 0.0f;
  for (int64_t k = blockIdx.x; k < tiles; k += gridDim.x) {
    const int64_t r0 = (k / tiles_c) * kBig, c0 = (k % tiles_c) * kBig;
    for (int half = 0; half < 2; ++half) {
      const int r = lr + 32 * half;
      const int64_t at = (r0 + r) * cols + c0 + lc;
      union {
        uint4 v;
        T x[8];
      } src;
      src.v = *reinterpret_cast<const uint4*>(in + at);
      union {
        uint2 v;
        uint8_t b[8];
      } dst;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float x = util::to_float(src.x[j]);
        local_max = fmaxf(local_max, fabsf(x));
        dst.b[j] = to_fp8<F>(x * s);
      }
      *reinterpret_cast<uint2*>(out + at) = dst.v;
      if (out_t != nullptr) *reinterpret_cast<uint2*>(&tile[r][lc]) = dst.v;
    }
    if (out_t != nullptr) fp8_device::write_tile_transposed(tile, out_t, rows, r0, c0);
  }
  if (amax != nullptr) block_max_to(amax, local_max);
}

// Blocks for the tiled kernel: a few per SM, no more than there are tiles.
unsigned tiled_blocks(int64_t tiles) {
  int device = 0, sms = 132;
  if (cudaGetDevice(&device) == cudaSuccess) cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  return unsigned(std::min<int64_t>(tiles, int64_t(sms) * 8));
}

template <typename T>
bool launch_tiles(const void* in, int64_t rows, int64_t cols, const float* scale, Fp8Type type, uint8_t* out,
                  uint8_t* out_t, float* amax, cudaStream_t stream) {
  if constexpr (sizeof(T) != 2) {
    return false;
  } else {
    const bool aligned = util::aligned16(in) && util::aligned16(out) && (out_t == nullptr || util::aligned16(out_t));
    if (rows % kBig != 0 || cols % kBig != 0 || !aligned) return false;
    const unsigned blocks = tiled_blocks((rows / kBig) * (cols / kBig));
    const T* src = static_cast<const T*>(in);
    if (type == Fp8Type::kE4M3)
      cast_tiles_kernel<T, Fp8Type::kE4M3>
          <<<blocks, kBigThreads, 0, stream>>>(src, rows, cols, scale, out, out_t, amax);
    else
      cast_tiles_kernel<T, Fp8Type::kE5M2>
          <<<blocks, kBigThreads, 0, stream>>>(src, rows, cols, scale, out, out_t, amax);
    return true;
  }
}

template <typename T>
void launch(const void* in, int64_t rows, int64_t cols, const float* scale, Fp8Type type, uint8_t* out, uint8_t* out_t,
            float* amax, cudaStream_t stream) {
  if (launch_tiles<T>(in, rows, cols, scale, type, out, out_t, amax, stream)) return;
  const dim3 block(kTile, kRowsPerPass);
  const dim3 grid(unsigned((cols + kTile - 1) / kTile), unsigned((rows + kTile - 1) / kTile));
  const T* src = static_cast<const T*>(in);
  if (type == Fp8Type::kE4M3)
    cast_kernel<T, Fp8Type::kE4M3><<<grid, block, 0, stream>>>(src, rows, cols, scale, out, out_t, amax);
  else
    cast_kernel<T, Fp8Type::kE5M2><<<grid, block, 0, stream>>>(src, rows, cols, scale, out, out_t, amax);
}

// Bytes, both dimensions multiples of kBig, 16-byte aligned: a 64 x 64 tile per block pass, 16-byte loads and stores.
__global__ void __launch_bounds__(kBigThreads)
    transpose_tiles_kernel(const uint8_t* __restrict__ in, int64_t rows, int64_t cols, uint8_t* __restrict__ out) {
  __shared__ __align__(16) uint8_t tile[kBig][kBig + 16];       // [row][col]
  const int r = threadIdx.x / 4, c16 = (threadIdx.x % 4) * 16;  // this thread's load: tile row r, bytes c16 .. + 15
  const int64_t tiles_c = cols / kBig, tiles = (rows / kBig) * tiles_c;
  for (int64_t k = blockIdx.x; k < tiles; k += gridDim.x) {
    const int64_t r0 = (k / tiles_c) * kBig, c0 = (k % tiles_c) * kBig;
    *reinterpret_cast<uint4*>(&tile[r][c16]) = *reinterpret_cast<const uint4*>(in + (r0 + r) * cols + c0 + c16);
    fp8_device::write_tile_transposed(tile, out, rows, r0, c0);
  }
}

// Any shape: a kTile x kTile tile per block, one byte per thread.
__global__ void transpose_kernel(const uint8_t* __restrict__ in, int64_t rows, int64_t cols,
                                 uint8_t* __restrict__ out) {
  __shared__ uint8_t tile[kTile][kTile + 4];
  const int64_t r0 = int64_t(blockIdx.y) * kTile, c0 = int64_t(blockIdx.x) * kTile;
  for (int i = threadIdx.y; i < kTile; i += kRowsPerPass)
    if (r0 + i < rows && c0 + threadIdx.x < cols) tile[i][threadIdx.x] = in[(r0 + i) * cols + c0 + threadIdx.x];
  __syncthreads();
  for (int j = threadIdx.y; j < kTile; j += kRowsPerPass)
    if (r0 + threadIdx.x < rows && c0 + j < cols) out[(c0 + j) * rows + r0 + threadIdx.x] = tile[threadIdx.x][j];
}

}  // namespace

void transpose_fp8(const uint8_t* in, int64_t rows, int64_t cols, uint8_t* out, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  if (rows % kBig == 0 && cols % kBig == 0 && util::aligned16(in) && util::aligned16(out)) {
    transpose_tiles_kernel<<<tiled_blocks((rows / kBig) * (cols / kBig)), kBigThreads, 0, stream>>>(in, rows, cols,
                                                                                                    out);
  } else {
    const dim3 grid(unsigned((cols + kTile - 1) / kTile), unsigned((rows + kTile - 1) / kTile));
    transpose_kernel<<<grid, dim3(kTile, kRowsPerPass), 0, stream>>>(in, rows, cols, out);
  }
  util::check(cudaGetLastError(), "transpose_fp8");
}

void cast_to_fp8(const void* in, FloatType in_type, int64_t rows, int64_t cols, const float* scale, Fp8Type type,
                 uint8_t* out, uint8_t* out_t, float* amax, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  switch (in_type) {
    case FloatType::kBFloat16:
      launch<__nv_bfloat16>(in, rows, cols, scale, type, out, out_t, amax, stream);
      break;
    case FloatType::kFloat16:
      launch<__half>(in, rows, cols, scale, type, out, out_t, amax, stream);
      break;
    case FloatType::kFloat32:
      launch<float>(in, rows, cols, scale, type, out, out_t, amax, stream);
      break;
  }
  util::check(cudaGetLastError(), "cast_to_fp8");
}

}  // namespace megaton::kernels
