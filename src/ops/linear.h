// Linear layers whose weight gradient goes straight into an fp32 main grad (gradient accumulation fusion, as
// Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication): the backward's weight-gradient GEMM accumulates
// dy^T x into the main grad (fp32 output, beta = 1) instead of writing a model-dtype gradient that DataParallel's hook
// would read back and add (one pass over every weight gradient and one kernel per weight less per micro-batch). The
// weight then gets no autograd gradient; DataParallel counts it ready all the same (parallel/main_grads.h).
#pragma once
#include <torch/torch.h>

#include <utility>

namespace torch::autograd {
struct AutogradContext;
}

namespace megaton::ops {

/// Where a weight's gradient goes under gradient accumulation fusion: `grad`, its fp32 main grad [out, in] (undefined:
/// no fusion), and `overwrite`, undefined or a CPU bool [1] (parallel::MainGrads): while true, grad holds nothing of
/// the current iteration (it was not zeroed) and the next weight gradient writes it instead of adding (GEMM beta 0),
/// then clears the flag.
struct MainGrad {
  MainGrad(torch::Tensor g = {}, torch::Tensor o = {}) : grad(std::move(g)), overwrite(std::move(o)) {}  // NOLINT
  bool defined() const { return grad.defined(); }
  torch::Tensor grad, overwrite;
};

/// For autograd functions that carry a MainGrad (apply() takes no undefined tensors): the two tensors to pass (empty
/// placeholders for undefined ones), saved in forward into ctx->saved_data under two keys, and the MainGrad back in
/// backward.
std::pair<torch::Tensor, torch::Tensor> main_grad_inputs(const MainGrad& m);
MainGrad saved_main_grad(torch::autograd::AutogradContext* ctx, const char* grad_key, const char* overwrite_key);

/// Whether a kernel that sums a parameter's gradient over rows (a bias, LayerNorm's gamma and beta) can write the n
/// sums straight into m: defined, fp32, contiguous, n elements, on `device`.
bool main_grad_takes_sums(const MainGrad& m, int64_t n, const torch::Device& device);
/// m's overwrite flag, cleared: true when the write being queued is the main grad's first of the iteration (it then
/// overwrites instead of adding). Call once per write, when it is sure to happen.
bool consume_overwrite(const MainGrad& m);

/// x [.., in], w [out, in], b [out] or undefined -> [.., out] = x w^T + b. main_grad undefined: torch::linear. Else
/// the backward adds (or first writes) dy^T x into main_grad.grad and gives w no gradient; with bias_main_grad, b's
/// gradient goes into it where the column-sum kernel takes it (ops::bias_grad), b then getting no gradient either.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, const MainGrad& main_grad,
                     const MainGrad& bias_main_grad = {});

/// The weight gradient dy^T x of y = x w^T: added into main_grad.grad (fp32 [out, in], written when its overwrite flag
/// is set) when it is defined, returning undefined; else returned (dy's dtype). dy [T, out], x [T, in].
torch::Tensor weight_grad(const torch::Tensor& dy, const torch::Tensor& x, const MainGrad& main_grad);

#ifdef MEGATON_HAVE_CUDA
}  // namespace megaton::ops
#include "column_sum_out.h"  // kernels/
namespace megaton::ops {

/// Where a column-sum kernel puts n sums: into m (its overwrite flag consumed) where main_grad_takes_sums(m, n,
/// vector_options' device), else into a new [n] vector of vector_options, returned in `vector` (left undefined when
/// the sums go into m). src/ops/linear_cuda.cpp.
kernels::ColumnSumOut column_sum_out(const MainGrad& m, int64_t n, const torch::TensorOptions& vector_options,
                                     torch::Tensor& vector);

/// main [out, in] fp32 = dy^T x + (overwrite ? 0 : main) with dy [T, out], x [T, in] bf16/fp16 contiguous on main's
/// device, in one cuBLAS GEMM (fp16/bf16 inputs, fp32 accumulation and output; beta 0 or 1). False (nothing done) for
/// anything else. src/ops/linear_cuda.cpp.
bool accumulate_weight_grad_cuda(const torch::Tensor& main, const torch::Tensor& dy, const torch::Tensor& x,
                                 bool overwrite = false);
#endif

}  // namespace megaton::ops
