// The steps an FP8 linear layer's forward and backward are made of, shared by ops/fp8/fp8_linear.h's layer and
// ops/fp8/fp8_mlp.h's MLP: each cast's scale and amax cell under the recipe, the shape check, and on a GPU the
// forward GEMM with its bias (and GELU) epilogue, the output gradient's cast, and the dgrad and wgrad GEMMs.
#pragma once
#include <torch/torch.h>

#include <utility>

#include "ops/fp8/fp8_scaling.h"
#include "ops/gemm_algo_memo.h"
#include "ops/linear.h"
#ifdef MEGATON_HAVE_CUDA
#include "ops/fp8/fp8_cast.h"
#endif

namespace megaton::ops::fp8::steps {

// Amaxes are recorded (`record`) in training only, autograd on: evaluation forwards use the scales and leave them as
// they are, so a run's training is the same with or without --eval-interval.

/// The scale one cast of `t` uses in `slot`: fp32 [1] on t's device. Delayed: the slot's current scale. Tensorwise:
/// from t's own amax now (also recorded in the table, for inspection).
torch::Tensor scale_for(ScalingTable& table, int slot, const torch::Tensor& t, bool record);

/// x2 [T, in] and w [out, in]: in and out divisible by 16, T too on a GPU; else a UsageError naming the shapes.
void check_shapes(const torch::Tensor& x2, const torch::Tensor& w);

/// Before an output gradient's separate cast: with `pre` defined, dy2 becomes the GELU input's gradient
/// gelu_tanh'(pre) * dy2; with db_wanted, the bias gradient (of dy2 as it is then) goes into b_main where the column
/// sums go there, else into db (ops/gelu_bias_grad.h).
void bias_and_gelu_grad(torch::Tensor& dy2, const torch::Tensor& pre, bool db_wanted, const MainGrad& b_main,
                        torch::Tensor& db);

#ifdef MEGATON_HAVE_CUDA
/// The amax cell a delayed cast records into (row 0 of the slot's history), or undefined (tensorwise recorded it, or
/// nothing is recorded).
torch::Tensor amax_cell(ScalingTable& table, int slot, bool record);

/// y [T, out] = x w^T (+ b) of two cast operands, bf16/fp16 `dtype`; with `gelu` (b defined) y = gelu_tanh(pre) and
/// pre [T, out] = x w^T + b is returned too. The bias and the GELU in the GEMM's epilogue where cuBLASLt offers one,
/// else ATen ops after a plain FP8 GEMM; a RuntimeError where it offers no FP8 GEMM at all.
torch::Tensor forward_gemm(const Fp8Matrix& qx, const Fp8Matrix& qw, const torch::Tensor& b, bool gelu,
                           torch::ScalarType dtype, GemmAlgoMemo* memo, torch::Tensor& pre);

/// The output gradient dy2 [T, out] cast for the dgrad and wgrad GEMMs (with its transpose when `transpose`), the
/// bias gradient when db_wanted (into b_main where the column sums go there, else returned in db), and with `pre`
/// defined the GELU's derivative first (the GEMMs then take d_pre as dy). One kernel (cast_to_fp8_dbias) with
/// transposes under delayed scaling with fused casts where it takes the shapes; else the separate kernels, leaving
/// d_pre in dy2.
Fp8Matrix cast_output_grad(ScalingTable& table, int slot, bool record, bool transpose, torch::Tensor& dy2,
                           const torch::Tensor& pre, bool db_wanted, const MainGrad& b_main, torch::Tensor& db);

/// The backward GEMMs of y = x w^T from the cast output gradient qg: dx [T, in] = dy . w in `dtype` (when want_dx,
/// else undefined), from w's transpose w_t [in, out]; and the weight gradient dy^T x [out, in], from x's transpose x_t
/// [in, T] in FP8, added into main (written on its first write) or returned in fp32 when main is undefined; none
/// when x_t is undefined.
std::pair<torch::Tensor, torch::Tensor> backward_gemms(const Fp8Matrix& qg, const torch::Tensor& w_t,
                                                       const torch::Tensor& w_sinv, const torch::Tensor& x_t,
                                                       const torch::Tensor& x_sinv, torch::ScalarType dtype,
                                                       bool want_dx, const MainGrad& main, GemmAlgoMemo* memo);
#endif

}  // namespace megaton::ops::fp8::steps
