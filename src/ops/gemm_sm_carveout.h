// --optimizer-sm-carveout: GEMMs queued from the calling thread leave some of the GPU's SMs free, for kernels that run
// beside them on another stream (the deferred optimizer update of --overlap-optimizer-step). cuBLAS's persistent
// GEMM kernels otherwise occupy every SM, and a memory-bound kernel on a side stream only gets the gaps between them
// (BM_AdamBesideForward, docs/gpu.md: 0.3 % of the 1.3B update hidden). The target is the cuBLAS documented way for
// "a routine known to run concurrently with other work on different CUDA streams": cublasSetSmCountTarget on the
// calling thread's handle (ATen's cuBLAS GEMMs), CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET read back from that handle
// (megaton's cuBLASLt GEMMs, ops/cublaslt_gemm.h), and ATen's own carveout for its cuBLASLt GEMMs (addmm with a
// bias). A hint to cuBLAS's heuristic and grid size, not a hard partition. It can change which kernel runs (tile shape,
// split-K) and so the rounding of a product, as another cuBLAS version could: not bit-identical to running without.
#pragma once
#include <torch/torch.h>

namespace megaton::ops {

/// GEMMs queued from this thread on `device` target all but `carveout` of its SMs (0: all of them again). No-op for a
/// CPU device or a build without CUDA. Throws UsageError where carveout is negative or leaves no SM.
void set_gemm_sm_carveout(const torch::Device& device, int carveout);

/// The SM count this thread's GEMMs target (0: no target, every SM).
int gemm_sm_target(const torch::Device& device);

}  // namespace megaton::ops
