// An SM carveout for GEMMs: GEMMs queued from the calling thread leave some of the GPU's SMs free for kernels that run
// beside them on another stream. cuBLAS's persistent GEMM kernels otherwise occupy every SM, and a memory-bound kernel
// on a side stream only gets the gaps between them. The target is what cuBLAS documents for "a routine known to run
// concurrently with other work on different CUDA streams": cublasSetSmCountTarget on the calling thread's handle
// (ATen's cuBLAS GEMMs), and ATen's own carveout for its cuBLASLt GEMMs (addmm with a bias), which is process-wide:
// every thread's, while it is set. megaton's own cuBLASLt GEMMs (ops/cublaslt_gemm.h) do not take it (the benchmark
// below runs ATen's GEMMs only; reading the target there would add a handle query to every training GEMM). A hint to
// cuBLAS's heuristic and grid size, not a hard partition; it can change which kernel runs (tile shape, split-K) and so
// the rounding of a product.
//
// Measured, not used by training: BM_AdamBesideForward/{model}/{carveout} (perf/bench_adam.cpp) runs
// --overlap-optimizer-step's update beside a forward whose GEMMs leave 8, 16 or 32 SMs to it. On an H200 at the 1.3B
// shapes every carveout made the pair slower than the update before the forward (docs/gpu.md, sixteenth session), so
// no training flag sets it.
#pragma once
#include <torch/torch.h>

namespace megaton::ops {

/// GEMMs queued from this thread on `device` target all but `carveout` of its SMs (0: all of them again). No-op for a
/// CPU device or a build without CUDA. Throws UsageError where carveout is negative or leaves no SM. Set it back to 0
/// before the thread ends: ATen pools cuBLAS handles, and a later thread could be handed this one with the target.
void set_gemm_sm_carveout(const torch::Device& device, int carveout);

/// The SM count this thread's cuBLAS GEMMs target (0: no target, every SM).
int gemm_sm_target(const torch::Device& device);

}  // namespace megaton::ops
