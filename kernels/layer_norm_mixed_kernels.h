// Fused LayerNorm for an fp32 residual stream in a 16-bit model (Megatron's --fp32-residual-connection): the
// residual stream, the sum that the LayerNorm normalises and its gradient are fp32; gamma, beta, y and dy are of the
// model's type (bf16 or fp16), as Megatron's mixed-dtype fused LayerNorm (output in the weight's type). The same
// arithmetic as kernels/layer_norm_kernels.h (fp32 statistics and affine), in 8-element vectors: one 16-byte load of a
// 16-bit vector, two of an fp32 one.
//
// With the residual add (the layers' LayerNorms after the first):
//   forward:  sum = residual + x (x the branch's output, model type, upcast exactly; with the hidden dropout,
//             residual + round(x keep / (1 - p)), the dropped-out x rounded to the model type as ATen's dropout
//             rounds it) in fp32, written; y = LayerNorm(sum) in the model type.
//   backward: dsum = LayerNorm's input gradient + dresidual (fp32, the residual stream's gradient), written; the
//             branch's gradient round(dsum) (what autograd's cast to x's type gives) or, with the dropout,
//             round(round(dsum) keep / (1 - p)) (ATen's masked scale of the rounded gradient), written beside it.
// Without it (the first layer's LayerNorm, reading the fp32 embeddings): y = LayerNorm(x) for an fp32 x, dx fp32.
// Widths as layer_norm_kernels.h (8 <= h <= 16384, h % 8 == 0); every pointer 16-byte aligned.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "column_sum_out.h"
#include "float_type.h"
#include "layer_norm_kernels.h"  // LayerNormTuning, ResidualDropout

namespace megaton::kernels {

/// Forward. Without `residual`: x [rows, h] fp32. With `residual` and `sum` (fp32 [rows, h], both or neither): x
/// [rows, h] of `model_type` (bf16 or fp16), sum = residual + x written in fp32 and normalised; `dropout` (p > 0)
/// drops x out first (ResidualDropout: the same draws and keep bits as layer_norm_forward's). gamma, beta [h] and y
/// [rows, h] of `model_type`; mean, rstd [rows] fp32. `tuning`: forward_floats and forward_block as
/// layer_norm_forward's (counted in elements). Asynchronous on `stream`; throws std::invalid_argument for an
/// unsupported width, type or misaligned pointer and std::runtime_error when the launch fails.
void layer_norm_mixed_forward(const void* x, const void* gamma, const void* beta, void* y, float* mean, float* rstd,
                              FloatType model_type, int64_t rows, int64_t h, float eps, cudaStream_t stream,
                              const float* residual = nullptr, float* sum = nullptr, const LayerNormTuning& tuning = {},
                              const ResidualDropout& dropout = {});

/// The gradient of the add's 16-bit x (the branch), for a backward with a residual: round(dsum) in the model type,
/// through the forward's keep bits when p > 0 (ResidualDropoutGrad's rule).
struct MixedBranchGrad {
  void* dx = nullptr;             // [rows, h] of the model type, written; nullptr: not wanted
  float p = 0.f;                  // the forward's dropout probability; 0: none
  const uint8_t* keep = nullptr;  // the forward's keep bits (p > 0)
};

/// Rows of the backward's fp32 workspace per gradient (2 * partials * h floats), as layer_norm_backward_partials.
int64_t layer_norm_mixed_backward_partials(FloatType model_type, int64_t rows, int64_t h,
                                           const LayerNormTuning& tuning = {}, bool dropout = false);

/// Backward. dy [rows, h] of `model_type`; x [rows, h] fp32 (the forward's input, or its sum with a residual); gamma
/// [h] of `model_type`; mean, rstd [rows]; writes dx [rows, h] fp32 (+ dresidual [rows, h] fp32 where given),
/// dgamma and dbeta ([h] of `model_type`, or into fp32 main grads) and, where `branch.dx` is given, the branch's
/// gradient. workspace and partials as layer_norm_backward's. `tuning`: backward_floats and backward_block.
void layer_norm_mixed_backward(const void* dy, const float* x, const void* gamma, const float* mean, const float* rstd,
                               float* dx, const ColumnSumOut& dgamma, const ColumnSumOut& dbeta, float* workspace,
                               int64_t partials, FloatType model_type, int64_t rows, int64_t h, cudaStream_t stream,
                               const float* dresidual = nullptr, const MixedBranchGrad& branch = {},
                               const LayerNormTuning& tuning = {});

}  // namespace megaton::kernels
