// Hopper (sm_90) bulk asynchronous copies, global -> shared memory, completed on shared-memory barriers (the TMA
// unit's non-tensor mode: cp.async.bulk + mbarrier): one thread issues a row's loads in chunks, every thread waits for
// the chunk it is about to read, so a block computes on the first chunks while the rest are still in flight and a
// whole row is in flight per block from its start. Included by .cu files only; every function is for
// __CUDA_ARCH__ >= 900 code.
#pragma once
#include <cstdint>

namespace megaton::kernels::bulk {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// One thread: a barrier expecting one arrival (the issuing thread's) per phase.
__device__ __forceinline__ void barrier_init(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(bar)));
}

/// After barrier_init, before __syncthreads: the initialised barriers visible to the async proxy (the copy engine).
__device__ __forceinline__ void barrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

/// The issuing thread: arrive on `bar` expecting `bytes` and start copying them from global `src` to shared `dst`
/// (both 16-byte aligned, bytes a multiple of 16). The barrier's phase completes when every byte has landed.
__device__ __forceinline__ void load_async(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}

/// Every thread that reads the chunk: wait until `bar`'s phase `parity` (0 for a barrier's first use) completes.
__device__ __forceinline__ void wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  }
}

#endif

}  // namespace megaton::kernels::bulk
