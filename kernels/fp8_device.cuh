// Device helpers of the FP8 cast kernels (included by .cu files only): the saturating conversion to an FP8 byte and
// the amax reduction into one fp32 cell.
#pragma once
#include <cuda_fp8.h>

#include <cstdint>

#include "fp8_cast_kernels.h"  // Fp8Type

namespace megaton::kernels::fp8_device {

/// x as an FP8 byte: round to nearest, ties to even, clamped to the largest finite value (cvt.rn.satfinite).
template <Fp8Type F>
__device__ __forceinline__ uint8_t to_fp8(float x) {
  constexpr __nv_fp8_interpretation_t kind = F == Fp8Type::kE4M3 ? __NV_E4M3 : __NV_E5M2;
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, kind));
}

/// Non-negative floats order as their bit patterns do: atomicMax on the int view.
__device__ __forceinline__ void atomic_max_nonnegative(float* addr, float v) {
  atomicMax(reinterpret_cast<int*>(addr), __float_as_int(v));
}

/// The block's maximum of every thread's v, folded into *amax by one atomic (blockDim.x * blockDim.y a multiple of 32,
/// at most 1024). Every thread of the block calls it.
__device__ __forceinline__ void block_max_to(float* amax, float v) {
  __shared__ float warp_max[32];
  for (int off = 16; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  const int lane = (threadIdx.y * blockDim.x + threadIdx.x) % 32, warp = (threadIdx.y * blockDim.x + threadIdx.x) / 32;
  const int warps = blockDim.x * blockDim.y / 32;
  if (lane == 0) warp_max[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? warp_max[lane] : 0.0f;
    for (int off = 16; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    if (lane == 0) atomic_max_nonnegative(amax, v);
  }
}

/// The transposed write of a 64 x 64 tile of FP8 bytes held in shared memory ([row][col], rows 16-byte aligned) by a
/// block of 256 threads: thread t writes out_t row c0 + t / 4, bytes r0 + (t % 4) 16 .. + 15 (out_t [cols, rows],
/// 16-byte aligned rows). Synchronises the block before (the tile written) and after (the tile free again).
template <int kPitch>
__device__ __forceinline__ void write_tile_transposed(const uint8_t (&tile)[64][kPitch], uint8_t* out_t, int64_t rows,
                                                      int64_t r0, int64_t c0) {
  __syncthreads();
  const int c = threadIdx.x / 4, rr = (threadIdx.x % 4) * 16;
  union {
    uint4 v;
    uint8_t b[16];
  } col;
#pragma unroll
  for (int j = 0; j < 16; ++j) col.b[j] = tile[rr + j][c];
  *reinterpret_cast<uint4*>(out_t + (c0 + c) * rows + r0 + rr) = col.v;
  __syncthreads();
}

}  // namespace megaton::kernels::fp8_device
