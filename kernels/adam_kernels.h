// Fused Adam (AdamW, decoupled weight decay) over flat fp32 buffers, CUDA. The ATen path of
// optim::MixedPrecisionOptimizer::adam_update (plus the clip's g *= coeff) makes ~10 passes over [S] fp32 buffers,
// ~104 bytes of memory traffic per parameter; this kernel reads g, m, v, p once and writes m, v, p once (28 bytes),
// optionally also writing p rounded to the model's dtype (2 more bytes for bf16) so the master -> parameter copy goes.
//
// Per element i of a chunk (all arithmetic fp32, in the ATen path's order and roundings):
//   g = grad[i] * grad_scale   (or * *device_grad_scale: a clip coefficient the host never read)
//   m = beta1 * m + (1 - beta1) * g;          v = beta2 * v + (1 - beta2) * g * g
//   if the chunk decays: p = p * (1 - lr * weight_decay)
//   p = p - lr / bias_correction1 * m / (sqrt(v) / sqrt(bias_correction2) + eps)
//   param_out[i] = p rounded to param_out's type (when param_out is not null)
// One launch covers the whole buffer: a device-resident table of chunks ({start, len, decay}, len <= kAdamChunk), one
// thread block per chunk; elements in no chunk are not touched.
// Plain CUDA (no torch headers) so nvcc builds it anywhere; src/optim/adam_cuda.cpp wraps it.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "adam_hyper.h"
#include "float_type.h"

namespace megaton::kernels {

/// Elements per chunk at most: one thread block's work.
constexpr int64_t kAdamChunk = 65536;

/// One row of the chunk table. Three int64 so that the table can live in an int64 [C, 3] tensor.
struct AdamChunk {
  int64_t start;  // first element
  int64_t len;    // elements, 1..kAdamChunk
  int64_t decay;  // 1: weight decay applies to these elements, 0: it does not
};
static_assert(sizeof(AdamChunk) == 3 * sizeof(int64_t), "AdamChunk must be an int64 [3] row");

/// How the kernel spreads its work: each thread loads `packs_per_pass` 16-byte packs of each buffer (1, 2 or 4) before
/// computing any (more bytes in flight per thread, more registers). perf/bench_adam.cpp's BM_AdamTuning measures them;
/// every choice gives the same bits.
struct AdamTuning {
  int packs_per_pass = 1;
};

/// master, exp_avg, exp_avg_sq [S] fp32 updated in place; grad [S] fp32 read only; chunks [num_chunks] in device
/// memory. param_out: null, or [S] of `param_type` receiving the new masters rounded. Asynchronous on `stream`;
/// throws std::invalid_argument for a tuning it does not take and std::runtime_error when the launch fails.
void adam_step(float* master, float* exp_avg, float* exp_avg_sq, const float* grad, const AdamChunk* chunks,
               int64_t num_chunks, const AdamHyper& hyper, void* param_out, FloatType param_type, cudaStream_t stream,
               const AdamTuning& tuning = {});

}  // namespace megaton::kernels
