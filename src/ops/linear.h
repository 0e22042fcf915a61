// Linear layers whose weight gradient goes straight into an fp32 main grad (gradient accumulation fusion, as
// Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication): the backward's weight-gradient GEMM accumulates
// dy^T x into the main grad (fp32 output, beta = 1) instead of writing a model-dtype gradient that DataParallel's hook
// would read back and add (one pass over every weight gradient and one kernel per weight less per micro-batch). The
// weight then gets no autograd gradient; DataParallel counts it ready all the same (parallel/main_grads.h).
#pragma once
#include <torch/torch.h>

namespace megaton::ops {

/// x [.., in], w [out, in], b [out] or undefined -> [.., out] = x w^T + b. main_grad undefined: torch::linear. Else
/// fp32 [out, in] (w's main grad): the backward adds dy^T x into it and gives w no gradient.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                     const torch::Tensor& main_grad);

/// The weight gradient dy^T x of y = x w^T: added into main_grad (fp32 [out, in]) when it is defined, returning
/// undefined; else returned (dy's dtype). dy [T, out], x [T, in].
torch::Tensor weight_grad(const torch::Tensor& dy, const torch::Tensor& x, const torch::Tensor& main_grad);

#ifdef MEGATON_HAVE_CUDA
/// main [out, in] fp32 += dy^T x with dy [T, out], x [T, in] bf16/fp16 contiguous on main's device, in one cuBLAS GEMM
/// (fp16/bf16 inputs, fp32 accumulation and output). False (nothing done) for anything else. src/ops/linear_cuda.cpp.
bool accumulate_weight_grad_cuda(const torch::Tensor& main, const torch::Tensor& dy, const torch::Tensor& x);
#endif

}  // namespace megaton::ops
