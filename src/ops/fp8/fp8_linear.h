// A linear layer whose GEMMs run in FP8 (Transformer Engine's Linear under an FP8 recipe), y = x w^T + b:
//   forward  y  = fp8(x) . fp8(w)^T + b                   E4M3 x E4M3, bf16 out, the bias in the GEMM's epilogue
//   dgrad    dx = fp8(dy) . fp8(w)                         E5M2 (hybrid) or E4M3 dy x E4M3 w, bf16 out
//   wgrad    dw = fp8(dy)^T . fp8(x)  (--fp8-wgrad)        into the fp32 main grad; dy^T x in 16 bits without it
// each operand cast under its slot's scale in a ScalingTable (ops/fp8/fp8_scaling.h) and its amax recorded there;
// the bias and its gradient stay in 16/32 bits. fp8_linear_gelu is the MLP's fc1 with its tanh GELU: the GELU in the
// forward GEMM's epilogue (GELU_AUX_BIAS, which also writes its input for the backward), and in the backward the GELU
// derivative and the bias gradient in one kernel (ops/gelu_bias_grad.h) before the FP8 GEMMs. On a GPU the casts are
// kernels/fp8_cast_kernels.cu (the transposed copies the dgrad and wgrad GEMMs need written in the same pass) and the
// GEMMs cuBLASLt's; on the CPU the same values are computed from fp8_round-ed operands in fp32 (ops/fp8/fp8_format.h),
// so CPU runs test the recipe, the scaling state and its checkpoints, and a GPU run matches its CPU emulation up to the
// GEMMs' summation order.
#pragma once
#include <torch/torch.h>

#include <memory>
#include <string>

#include "ops/fp8/fp8_scaling.h"
#include "ops/gemm_algo_memo.h"
#include "ops/linear.h"

namespace megaton::ops::fp8 {

/// One layer's slots in a ScalingTable: its input, weight and output gradient; and the memo of cuBLASLt's algorithms
/// for its GEMMs (the layer holds its slots, so the memo outlives its backward), or none.
struct Fp8LinearSlots {
  ScalingTable* table = nullptr;
  int input = -1, weight = -1, grad_output = -1;
  std::shared_ptr<GemmAlgoMemo> memo;
  bool defined() const { return table != nullptr; }
};

/// Registers `name` (the weight's canonical name)'s three tensors in `table`: "<name>:input", ":weight",
/// ":grad_output"; the slots come with a new memo.
Fp8LinearSlots register_fp8_linear(ScalingTable& table, const std::string& name);

/// x [.., in] -> [.., out] = x w^T + b (b [out] or undefined) with the GEMMs in FP8 under `slots`. With main_grad
/// defined the weight gradient goes into it (ops/linear.h's gradient accumulation fusion); else w gets it through
/// autograd; bias_main_grad likewise for b's gradient, where the column-sum kernel takes it (ops::bias_grad).
/// Dimensions: in and out divisible by 16, the tokens (x's rows) too on a GPU (cuBLASLt's FP8 kernels); anything else
/// is a UsageError naming the shapes.
torch::Tensor fp8_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                         const MainGrad& main_grad, const Fp8LinearSlots& slots, const MainGrad& bias_main_grad = {});

/// gelu_tanh(x w^T + b), b [out] defined, with fp8_linear's GEMMs, main grads and dimensions.
torch::Tensor fp8_linear_gelu(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                              const MainGrad& main_grad, const Fp8LinearSlots& slots,
                              const MainGrad& bias_main_grad = {});

}  // namespace megaton::ops::fp8
