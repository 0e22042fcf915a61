#include <climits>
#include <cstdint>
#include <stdexcept>

#include "adam8bit_kernels.h"
#include "kernel_util.cuh"

namespace megaton::kernels {
namespace {

using util::check;

constexpr int kThreads = 256;
constexpr int kPerThread = kAdam8bitBlock / kThreads;  // 8

// max that propagates NaN, as ATen's amax does.
__device__ __forceinline__ float nan_max(float a, float b) {
  return (isnan(a) || a > b) ? a : b;
}

__device__ float block_max(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v = nan_max(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // scratch may still be read from a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = scratch[0];
  for (int w = 1; w < kThreads / 32; ++w) r = nan_max(r, scratch[w]);
  return r;
}

// bitsandbytes' quantize_2D over a sorted 256-entry map, plus its 8-bit optimizers' sign rule for signed maps.
template <bool kSigned>
__device__ __forceinline__ uint8_t quantize(const float* map, float x) {
  int pivot = 127, upper_pivot = 255, lower_pivot = 0;
  float lower = kSigned ? -1.0f : 0.0f, upper = 1.0f, val = map[127];
  for (int step = 64; step > 0; step >>= 1) {
    if (x > val) {
      lower_pivot = pivot;
      lower = val;
      pivot += step;
    } else {
      upper_pivot = pivot;
      upper = val;
      pivot -= step;
    }
    val = map[pivot];
  }
  int c;
  if (x > val)
    c = x > __fmul_rn(__fadd_rn(upper, val), 0.5f) ? upper_pivot : pivot;
  else
    c = x < __fmul_rn(__fadd_rn(lower, val), 0.5f) ? lower_pivot : pivot;
  if (kSigned && signbit(map[c]) != signbit(x)) c += x > 0.0f ? 1 : -1;
  return static_cast<uint8_t>(c < 0 ? 0 : (c > 255 ? 255 : c));
}

__global__ void __launch_bounds__(kThreads)
    adam8bit_kernel(float* master, const float* grad, uint8_t* codes1, uint8_t* codes2, float* absmax1, float* absmax2,
                    const float* map1, const float* map2, const int64_t* block_start, const int64_t* block_len,
                    const bool* block_decay, Adam8bitScalars s) {
  __shared__ float m1[256], m2[256], scratch[kThreads / 32];
  m1[threadIdx.x] = map1[threadIdx.x];
  m2[threadIdx.x] = map2[threadIdx.x];
  __syncthreads();
  const int64_t b = blockIdx.x;
  const int64_t start = block_start[b];
  const int len = static_cast<int>(block_len[b]);
  uint8_t* c1 = codes1 + b * kAdam8bitBlock;
  uint8_t* c2 = codes2 + b * kAdam8bitBlock;
  const float a1 = absmax1[b], a2 = absmax2[b];
  float st1[kPerThread], st2[kPerThread];
  float mx1 = 0.0f, mx2 = 0.0f;
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int j = threadIdx.x + k * kThreads;
    st1[k] = st2[k] = 0.0f;
    if (j < len) {
      const float g = grad[start + j];
      st1[k] = __fadd_rn(__fmul_rn(__fmul_rn(m1[c1[j]], a1), s.beta1), __fmul_rn(g, s.one_minus_beta1));
      st2[k] = __fadd_rn(__fmul_rn(__fmul_rn(m2[c2[j]], a2), s.beta2), __fmul_rn(__fmul_rn(g, g), s.one_minus_beta2));
    }
    mx1 = nan_max(mx1, fabsf(st1[k]));
    mx2 = nan_max(mx2, st2[k]);
  }
  const float new1 = block_max(mx1, scratch);
  const float new2 = block_max(mx2, scratch);
  if (threadIdx.x == 0) {
    absmax1[b] = new1;
    absmax2[b] = new2;
  }
  const bool decay = s.weight_decay && block_decay[b];
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int j = threadIdx.x + k * kThreads;
    if (j < len) {
      float p = master[start + j];
      p = __fadd_rn(p, __fmul_rn(__fdiv_rn(st1[k], __fadd_rn(__fsqrt_rn(st2[k]), s.eps_c2)), s.step_size));
      if (decay) p = __fmul_rn(p, s.decay_factor);
      master[start + j] = p;
    }
    c1[j] = quantize<true>(m1, __fdiv_rn(st1[k], new1));
    c2[j] = quantize<false>(m2, __fdiv_rn(st2[k], new2));
  }
}

}  // namespace

void adam8bit_step(float* master, const float* grad, uint8_t* codes1, uint8_t* codes2, float* absmax1, float* absmax2,
                   const float* map1, const float* map2, const int64_t* block_start, const int64_t* block_len,
                   const bool* block_decay, int64_t num_blocks, const Adam8bitScalars& s, cudaStream_t stream) {
  if (num_blocks == 0) return;
  if (num_blocks > INT_MAX) throw std::runtime_error("adam8bit_step: more than INT_MAX blocks");
  adam8bit_kernel<<<static_cast<int>(num_blocks), kThreads, 0, stream>>>(
      master, grad, codes1, codes2, absmax1, absmax2, map1, map2, block_start, block_len, block_decay, s);
  check(cudaGetLastError(), "adam8bit_step launch");
}

}  // namespace megaton::kernels
