#include <cuda_fp8.h>

#include "fp8_cast_kernels.h"
#include "kernel_util.cuh"

namespace megaton::kernels {

namespace {

constexpr int kTile = 32;        // a block casts a kTile x kTile tile
constexpr int kRowsPerPass = 8;  // blockDim = (kTile, kRowsPerPass)

template <Fp8Type F>
__device__ __forceinline__ uint8_t to_fp8(float x) {
  constexpr __nv_fp8_interpretation_t kind = F == Fp8Type::kE4M3 ? __NV_E4M3 : __NV_E5M2;
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, kind));
}

// Non-negative floats order as their bit patterns do: atomicMax on the int view.
__device__ __forceinline__ void atomic_max_nonnegative(float* addr, float v) {
  atomicMax(reinterpret_cast<int*>(addr), __float_as_int(v));
}

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
  if (amax != nullptr) {
    for (int off = 16; off > 0; off /= 2) local_max = fmaxf(local_max, __shfl_xor_sync(0xffffffffu, local_max, off));
    if (threadIdx.x == 0) atomic_max_nonnegative(amax, local_max);
  }
}

template <typename T>
void launch(const void* in, int64_t rows, int64_t cols, const float* scale, Fp8Type type, uint8_t* out, uint8_t* out_t,
            float* amax, cudaStream_t stream) {
  const dim3 block(kTile, kRowsPerPass);
  const dim3 grid(unsigned((cols + kTile - 1) / kTile), unsigned((rows + kTile - 1) / kTile));
  const T* src = static_cast<const T*>(in);
  if (type == Fp8Type::kE4M3)
    cast_kernel<T, Fp8Type::kE4M3><<<grid, block, 0, stream>>>(src, rows, cols, scale, out, out_t, amax);
  else
    cast_kernel<T, Fp8Type::kE5M2><<<grid, block, 0, stream>>>(src, rows, cols, scale, out, out_t, amax);
}

}  // namespace

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
