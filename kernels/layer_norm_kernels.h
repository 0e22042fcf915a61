// Fused LayerNorm over the last dimension, CUDA. ATen's kernels (vectorized_layer_norm_kernel forward,
// layer_norm_grad_input_kernel + GammaBetaBackwardCUDAKernelTemplate backward) read x and dy twice in the backward
// and reach ~1.3 TB/s forward on an H200; here the forward reads x once and writes y once, and the backward reads x
// and dy once, writes dx once and leaves dgamma/dbeta as small per-block partial sums (Apex's fused layer norm does
// the same: cuComputePartGradGammaBeta / cuComputeGradGammaBeta, there in a separate pass over x and dy).
//
// Per row r of x [rows, h], all arithmetic fp32 whatever the element type:
//   forward:  mean[r] = sum_c x[r, c] / h;  var = sum_c (x[r, c] - mean[r])^2 / h  (biased, as torch);
//             rstd[r] = 1 / sqrt(var + eps);  y[r, c] = (x[r, c] - mean[r]) * rstd[r] * gamma[c] + beta[c]
//   backward: xhat = (x - mean) * rstd;  g = dy * gamma;
//             dx[r, c] = rstd[r] * (g[c] - sum_c' g[c'] / h - xhat[c] * sum_c' g[c'] xhat[c'] / h)
//             dgamma[c] = sum_r dy[r, c] xhat[r, c];  dbeta[c] = sum_r dy[r, c]
//   The backward kernel accumulates dgamma/dbeta over the rows each thread block handles into an fp32 workspace
//   [2, partials, h]; a second kernel sums the partials in a fixed order (the result is deterministic on one GPU).
// x, y, dy, dx, gamma, beta, dgamma, dbeta share one element type. Supported (layer_norm_supported_width): 8 <= h <=
// 16384 with h % 8 == 0; every pointer 16-byte aligned (loads and stores are 16-byte vectors: 8 bf16/fp16 or 4 fp32).
// Plain CUDA (no torch headers) so nvcc builds it anywhere; src/ops/layer_norm_cuda.cpp wraps it.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "column_sum_out.h"
#include "float_type.h"
#include "philox_seed.h"

namespace megaton::kernels {

constexpr int64_t kLayerNormMinWidth = 8;
constexpr int64_t kLayerNormMaxWidth = 16384;

/// Whether the kernels handle rows of h elements (the pointers must be 16-byte aligned as well).
inline bool layer_norm_supported_width(int64_t h) {
  return h >= kLayerNormMinWidth && h <= kLayerNormMaxWidth && h % 8 == 0;
}

/// How the kernels split a row among threads. Each thread takes `floats` elements of a row (rounded to whole 16-byte
/// vectors; more when a row would need more than 512 threads) and keeps them in registers: more per thread means more
/// loads in flight per thread but more registers (fewer threads per SM). A row whose threads fit in one warp gets one
/// warp (shuffles only), otherwise a group of warps per row. The backward keeps two fp32 sums per element it owns
/// across rows and takes `backward_rows` rows (1 or 2) per pass. A thread block holds as many rows' groups as fit in
/// its block size (32..512 threads; smaller blocks let more of them share an SM when registers are the limit, larger
/// ones leave the backward fewer dgamma/dbeta partial sums).
/// perf/bench_layer_norm.cpp (BM_LayerNormTuning) measures the choices; the defaults are its best on an H200 at the
/// GPT-2 124M and 1.3B widths (bf16, with the residual add; docs/gpu.md): forward_floats 0 = a warp per row up to
/// h = 1024 (32 per thread: 55 us at h = 768, 3.67 TB/s), else 16 (h = 2048: 76 us, 3.54 TB/s, where 32 per thread in
/// blocks of 512 took 98 us); the backward 8 in blocks of 512 (h = 768: 73 us, 2.76 TB/s, against 93-97 with 16-24
/// or 80 in blocks of 256; h = 2048: 101 us against 103-112), with its loads three rows ahead through the ring
/// (backward_stages 4, H200: h = 768 61.5 us, 3.27 TB/s; h = 2048 83.5 us, 3.22 TB/s; without the
/// ring 69.8 / 96.4 us, with 2 stages 59.7 / 85.4).
struct LayerNormTuning {
  int forward_floats = 0;
  int backward_floats = 8;
  int backward_rows = 1;
  int forward_block = 256;
  int backward_block = 512;
  /// The backward loads the residual gradient together with x and dy, before the row's reduction, instead of after
  /// it (taken at 1 row per pass and <= 8 elements per thread; otherwise ignored): h = 768 73.2 -> 69.5 us, h = 2048
  /// 101.2 -> 96.6 us (BM_LayerNormTuning, H200).
  bool backward_early_residual = true;
  /// The backward's loads run ahead of its arithmetic through a shared-memory ring of this many rows per group (2 or
  /// 4; cp.async, each thread copying its own vectors; taken up to 8 elements per thread and where the ring fits,
  /// one row per pass), or 0: straight into registers, one row per pass in flight (backward_rows, early residual).
  int backward_stages = 4;
  /// With a ResidualDropoutGrad, the backward writes the dropout's input gradient in its own kernel (true) or a
  /// separate pass over dx and the keep bits after it writes dx (false).
  bool backward_dropout_fused = true;
};

/// Hidden dropout drawn inside layer_norm_forward's residual add (Megatron's bias-dropout-add without the bias, fused
/// into the LayerNorm that reads it): sum = residual + round(x * keep / (1 - p)), both rounded to the element type as
/// ATen's fused dropout and add round them. 16-bit element types only. Element e = r * h + c of pack q = e / 8 keeps
/// iff its 32-bit draw u < floor((1 - p) * 2^32): u = the (e % 8)-th word of Philox4x32-10(key = seed, counter =
/// (offset / 4 + (e % 8) / 4, q)) (curand_init(seed, q, offset) then two curand4 calls: eight words per pack, so each
/// call takes kResidualDropoutPhiloxIncrement of the generator's offset). The keep bits ([rows * h / 8] bytes, bit
/// e % 8 of byte e / 8) are written for the backward.
struct ResidualDropout {
  float p = 0.f;  // drop probability in [0, 1); 0: none
  PhiloxSeed philox;
  uint8_t* keep = nullptr;  // [rows * h / 8], written
};
constexpr uint64_t kResidualDropoutPhiloxIncrement = 8;

/// The backward of ResidualDropout: the gradient of its x, dx_dropout = round(dx * keep / (1 - p)) from the rounded
/// dx (the residual's gradient), as ATen's masked scale computes it; written beside dx.
struct ResidualDropoutGrad {
  float p = 0.f;                  // as the forward's; 0: none
  const uint8_t* keep = nullptr;  // the forward's keep bits
  void* dx_dropout = nullptr;     // [rows, h], written
};

/// Forward. x, y [rows, h] row-major (contiguous), gamma, beta [h]; writes y and mean, rstd [rows] fp32.
/// With `residual` and `sum` ([rows, h], both or neither): sum = x + residual (rounded to the element type, as ATen's
/// add) is written and normalised instead of x (the transformer's residual add fused into the next LayerNorm).
/// Asynchronous on `stream`; throws std::invalid_argument for an unsupported h or a misaligned pointer and
/// std::runtime_error when the launch fails.
/// With `dropout` (p > 0; residual and sum given, 16-bit type): x is dropped out before the add (ResidualDropout).
void layer_norm_forward(const void* x, const void* gamma, const void* beta, void* y, float* mean, float* rstd,
                        FloatType type, int64_t rows, int64_t h, float eps, cudaStream_t stream,
                        const void* residual = nullptr, void* sum = nullptr, const LayerNormTuning& tuning = {},
                        const ResidualDropout& dropout = {});

/// Rows of the backward's fp32 workspace per gradient (for the same `tuning` as the backward's): the backward needs
/// `workspace` of 2 * partials * h floats. One per thread block of the backward's grid (as many as fit on the current
/// device at once, at most one per group of rows).
/// `dropout`: for a backward that takes a ResidualDropoutGrad (its kernel may fit fewer blocks per SM).
int64_t layer_norm_backward_partials(FloatType type, int64_t rows, int64_t h, const LayerNormTuning& tuning = {},
                                     bool dropout = false);

/// Backward. dy, x, dx [rows, h], gamma [h], mean, rstd [rows] from the forward; writes dx, dgamma and dbeta [h] (in
/// `type`, or each added into its fp32 main grad: kernels/column_sum_out.h); workspace: 2 * partials * h floats from
/// layer_norm_backward_partials (any partials >= 1 gives the same sums up to rounding; the same partials give the same
/// bits). With `dresidual` [rows, h]: dx += dresidual before rounding (the gradient of the residual branch that also
/// reads the forward's sum). With `dropout` (p > 0, 16-bit type): also the gradient of the forward's dropped-out x
/// (ResidualDropoutGrad). Asynchronous on `stream`; throws as the forward.
void layer_norm_backward(const void* dy, const void* x, const void* gamma, const float* mean, const float* rstd,
                         void* dx, const ColumnSumOut& dgamma, const ColumnSumOut& dbeta, float* workspace,
                         int64_t partials, FloatType type, int64_t rows, int64_t h, cudaStream_t stream,
                         const void* dresidual = nullptr, const LayerNormTuning& tuning = {},
                         const ResidualDropoutGrad& dropout = {});

}  // namespace megaton::kernels
