#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <stdexcept>
#include <string>

#include "grad_accum_kernels.h"
#include "kernel_util.cuh"

namespace megaton::kernels {

namespace {

using util::to_float;

// Vector part: element groups of 8 (16 bytes of bf16/fp16, 32 of fp32 grads; 32 bytes of fp32 main grads), then a
// scalar tail. Used only when both pointers are 16-byte aligned.
template <typename T>
__global__ void accumulate_vec8_kernel(const T* __restrict__ grad, float* __restrict__ main, int64_t groups) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups; g += stride) {
    T in[8];
    if constexpr (sizeof(T) == 2) {
      *reinterpret_cast<uint4*>(in) = reinterpret_cast<const uint4*>(grad)[g];
    } else {
      reinterpret_cast<float4*>(in)[0] = reinterpret_cast<const float4*>(grad)[2 * g];
      reinterpret_cast<float4*>(in)[1] = reinterpret_cast<const float4*>(grad)[2 * g + 1];
    }
    float4 a = reinterpret_cast<float4*>(main)[2 * g];
    float4 b = reinterpret_cast<float4*>(main)[2 * g + 1];
    a.x += to_float(in[0]), a.y += to_float(in[1]), a.z += to_float(in[2]), a.w += to_float(in[3]);
    b.x += to_float(in[4]), b.y += to_float(in[5]), b.z += to_float(in[6]), b.w += to_float(in[7]);
    reinterpret_cast<float4*>(main)[2 * g] = a;
    reinterpret_cast<float4*>(main)[2 * g + 1] = b;
  }
}

template <typename T>
__global__ void accumulate_scalar_kernel(const T* __restrict__ grad, float* __restrict__ main, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    main[i] += to_float(grad[i]);
}

int blocks_for(int64_t work, int threads) {
  const int64_t want = (work + threads - 1) / threads;
  return static_cast<int>(want < 1 ? 1 : (want > 65535 * 8 ? 65535 * 8 : want));
}

template <typename T>
void launch(const void* grad_v, float* main, int64_t n, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const T* grad = static_cast<const T*>(grad_v);
  const bool aligned = reinterpret_cast<uintptr_t>(grad) % 16 == 0 && reinterpret_cast<uintptr_t>(main) % 16 == 0;
  int64_t done = 0;
  if (aligned && n >= 8) {
    const int64_t groups = n / 8;
    accumulate_vec8_kernel<T><<<blocks_for(groups, kThreads), kThreads, 0, stream>>>(grad, main, groups);
    util::check(cudaGetLastError(), "accumulate_grad_fp32 vector launch");
    done = groups * 8;
  }
  if (done < n) {
    accumulate_scalar_kernel<T>
        <<<blocks_for(n - done, kThreads), kThreads, 0, stream>>>(grad + done, main + done, n - done);
    util::check(cudaGetLastError(), "accumulate_grad_fp32 scalar launch");
  }
}

}  // namespace

void accumulate_grad_fp32(const void* grad, FloatType grad_type, float* main, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  switch (grad_type) {
    case FloatType::kBFloat16:
      return launch<__nv_bfloat16>(grad, main, n, stream);
    case FloatType::kFloat16:
      return launch<__half>(grad, main, n, stream);
    case FloatType::kFloat32:
      return launch<float>(grad, main, n, stream);
  }
}

}  // namespace megaton::kernels
