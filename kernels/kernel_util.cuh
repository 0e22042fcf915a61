// Device helpers shared by Megaton's CUDA kernels (included by the .cu files only): fp32 <-> element-type conversion
// (bf16 rounds to nearest even, as Tensor.to(kBFloat16)), the host-side launch check and the device's shared-memory
// limit.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "column_sum_out.h"

namespace megaton::kernels::util {

__device__ __forceinline__ float to_float(float x) {
  return x;
}
__device__ __forceinline__ float to_float(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
__device__ __forceinline__ float to_float(__half x) {
  return __half2float(x);
}

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16(x);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half(x);
}

/// Stores column c's sum s where `o` says: the element-type vector, or added into (or written over) the fp32 main grad.
template <typename T>
__device__ __forceinline__ void store_column_sum(const ColumnSumOut& o, int64_t c, float s) {
  if (o.main != nullptr)
    o.main[c] = o.overwrite ? s : o.main[c] + s;
  else
    static_cast<T*>(o.out)[c] = from_float<T>(s);
}

/// Throws std::runtime_error("WHAT: <CUDA's message>") unless `e` is cudaSuccess (the wrappers turn it into a typed
/// megaton error).
inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

/// Whether p starts on a 16-byte boundary (the kernels' vector loads and stores).
inline bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

/// The current device's per-block opt-in shared memory in bytes, or 0 when it cannot be read.
inline int optin_smem() {
  int device = 0, optin = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess)
    return 0;
  return optin;
}

}  // namespace megaton::kernels::util
