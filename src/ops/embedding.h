// The embedding lookup whose weight gradient goes straight into an fp32 main grad (gradient accumulation fusion, as
// ops/linear.h does for the linear layers): the backward adds each id's summed rows of the output gradient into that
// id's row of the main grad instead of returning a dense model-dtype [V, h] gradient for DataParallel's hook to add.
// On CUDA one deterministic kernel after a sort (kernels/embedding_grad_kernels.h); on the CPU index_add_.
#pragma once
#include <torch/torch.h>

#include "ops/linear.h"

namespace megaton::ops {

/// weight [V, h], ids [..] int64 in [0, V) -> [.., h] = weight[ids]. main_grad undefined (or no autograd): ATen's
/// torch::embedding. Else the backward adds the gradient of each row of weight into main_grad.grad (fp32 [V, h]; first
/// zeroed when its overwrite flag is set) and gives weight no gradient.
torch::Tensor embedding(const torch::Tensor& weight, const torch::Tensor& ids, const MainGrad& main_grad);

/// main [V, h] fp32 += the rows of grad [n, h] summed by ids [n] (fp32 sums, a fixed order). On CUDA the kernel, else
/// index_add_. Ids outside [0, V) are an error on the CPU (index_add_) and skipped on CUDA.
void accumulate_embedding_grad(const torch::Tensor& main, const torch::Tensor& ids, const torch::Tensor& grad);

#ifdef MEGATON_HAVE_CUDA
/// The CUDA path of accumulate_embedding_grad (src/ops/embedding_cuda.cpp): false (nothing done) unless every tensor
/// is on main's CUDA device, main is contiguous fp32 and grad fp32/bf16/fp16.
bool accumulate_embedding_grad_cuda(const torch::Tensor& main, const torch::Tensor& ids, const torch::Tensor& grad);
#endif

}  // namespace megaton::ops
