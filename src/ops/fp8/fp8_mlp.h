// The GPT MLP y = fc2(gelu_tanh(fc1(x))) with every GEMM in FP8, as one autograd function on a GPU (Transformer
// Engine's LayerNormMLP, without the LayerNorm). fc1's GEMM writes the GELU's output straight as FP8 under fc2's input
// scale (cuBLASLt's GELU_AUX_BIAS epilogue with an FP8 output and its amax), so the 16-bit activation [T, f] is never
// written, nor read back by a cast; only its FP8 transpose, for fc2's weight gradient, is made from the bytes. The
// backward: fc2's output-gradient cast with fc2's bias gradient in one pass, fc2's dgrad and wgrad GEMMs, then the
// GELU's derivative with its cast and fc1's bias gradient in one pass, fc1's GEMMs (ops/fp8/fp8_gemm_steps.h). The
// values are fp8_linear_gelu's followed by fp8_linear's, but for the activation's one rounding (fp32 to FP8, where
// the two layers round to 16 bits first) and its amax (cuBLASLt's, of the unrounded values).
#pragma once
#include <torch/torch.h>

#include "ops/fp8/fp8_linear.h"

namespace megaton::ops::fp8 {

/// The MLP's parameters: fc1 [f, h] with its bias [f]; fc2 [h, f] with its bias [h], or undefined (tensor parallel:
/// added after the reduction); their main grads (ops/linear.h) and FP8 slots, in one ScalingTable.
struct Fp8MlpParams {
  torch::Tensor w1, b1, w2, b2;
  MainGrad w1_main, b1_main, w2_main, b2_main;
  Fp8LinearSlots fc1, fc2;
};

/// Whether fp8_mlp takes x and p: a CUDA build, x bf16 or fp16 on a GPU, fc1's bias defined, both layers' slots in
/// one table under delayed scaling (the activation's scale must be known before fc1's GEMM) with FP8 weight gradients
/// (only the FP8 activation is kept for fc2's), and fused casts (Fp8Options::fused_casts). Elsewhere the caller runs
/// fp8_linear_gelu and fp8_linear.
bool fp8_mlp_supported(const torch::Tensor& x, const Fp8MlpParams& p);

/// x [.., h] -> [.., h]; requires fp8_mlp_supported. Dimensions as fp8_linear's (a UsageError otherwise).
torch::Tensor fp8_mlp(const torch::Tensor& x, const Fp8MlpParams& p);

}  // namespace megaton::ops::fp8
