// cuBLASLt GEMMs with the MLP's fused epilogues (as Transformer Engine runs them), declared only in CUDA builds:
// fc1 with its bias and GELU (GELU_AUX_BIAS) and fc2's input gradient times the GELU derivative (DGELU);
// ops/gemm_epilogue.cpp calls them. Matrices are row-major, contiguous, bf16 or fp16, of one dtype, with T rows of
// tokens; each function returns false without touching its outputs when cuBLASLt offers no algorithm for the shapes
// and alignments given (the caller then computes the same with ATen). Each runs the algorithm cuBLASLt's heuristic
// ranks first, looked up in `memo` (ops/gemm_algo_memo.h) when one is given, else asked on every call.
//
// cuBLASLt's GELU is the tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
#pragma once
#ifdef MEGATON_HAVE_CUDA
#include <torch/torch.h>

#include "ops/fp8/fp8_format.h"
#include "ops/gemm_algo_memo.h"

namespace megaton::ops::lt {

/// Forward of fc1 + GELU: pre = x w^T + b and act = gelu(pre) in one GEMM (epilogue GELU_AUX_BIAS).
/// x [T, in], w [out, in], b [out] -> act, pre [T, out] (preallocated, contiguous).
bool linear_gelu_aux(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, torch::Tensor& act,
                     torch::Tensor& pre, GemmAlgoMemo* memo = nullptr);

/// Backward through fc2's input and the GELU: d_pre = (dy w) * gelu'(pre), the derivative applied to the fp32
/// product before its one rounding (epilogue DGELU). dy [T, h], w [h, f], pre [T, f] -> d_pre [T, f] (preallocated).
bool linear_dgelu(const torch::Tensor& dy, const torch::Tensor& w, const torch::Tensor& pre, torch::Tensor& d_pre,
                  GemmAlgoMemo* memo = nullptr);

/// One FP8 operand: its bytes [rows, k] row-major (k contiguous), the scale inverse that turns them back into the
/// tensor's units (fp32 [1] on the device) and their format.
struct Fp8Operand {
  const torch::Tensor& bytes;
  const torch::Tensor& scale_inv;
  fp8::Format format;
};

/// What an FP8 GEMM's epilogue adds to its product p [M, N] (not accumulating): nothing; the bias (epilogue BIAS:
/// d = p + bias); or, with `gelu_pre` too, the bias and the tanh GELU (GELU_AUX_BIAS: gelu_pre = p + bias,
/// d = gelu(gelu_pre)). d is bf16 or fp16, or FP8 bytes (uint8) in `d_format` under `d_scale`: d = fp8(e * d_scale)
/// of the epilogue's result e, and d_amax (when defined) is set to max |e|; the bias and gelu_pre are then 16-bit.
struct Fp8Epilogue {
  torch::Tensor bias;      // [N], d's dtype (FP8 d: bf16 or fp16), or undefined
  torch::Tensor gelu_pre;  // [M, N] contiguous, d's dtype (FP8 d: the bias's), written; or undefined
  torch::Tensor d_scale;   // FP8 d: fp32 [1] on the device
  torch::Tensor d_amax;    // FP8 d: fp32 [1] on the device, written; or undefined
  fp8::Format d_format = fp8::Format::kE4M3;
};

/// d [M, N] = (a [M, K] . b [N, K]^T) * a.scale_inv * b.scale_inv, added to d when `accumulate` (d fp32), else
/// written (d bf16, fp16, fp32 or FP8 bytes) through `epilogue`. Both operands K-major (Hopper's FP8 GEMMs take no
/// other layout), not both E5M2; fp32 accumulation, or Hopper's fast accumulation with `fast_accum` (Transformer
/// Engine's choice for the forward). False, with d untouched, where cuBLASLt offers no algorithm for this GEMM or
/// refuses the one it offered.
bool fp8_gemm(const Fp8Operand& a, const Fp8Operand& b, torch::Tensor& d, bool accumulate, bool fast_accum,
              GemmAlgoMemo* memo = nullptr, const Fp8Epilogue& epilogue = {});

}  // namespace megaton::ops::lt

#endif  // MEGATON_HAVE_CUDA
