// main_grad += grad: how DataParallel's hooks fold a parameter's model-dtype gradient into its fp32 main grad.
#pragma once
#include <torch/torch.h>

namespace megaton::parallel {

/// main (fp32) += grad (fp32, bf16 or fp16; same number of elements). Contiguous CUDA tensors take
/// kernels/grad_accum_kernels.cu (16-byte vector loads; ATen's mixed-dtype add is not vectorised); everything else is
/// ATen's `main.add_(grad)`, which the CPU path keeps bit for bit.
void accumulate_main_grad(torch::Tensor& main, const torch::Tensor& grad);

#ifdef MEGATON_HAVE_CUDA
/// The CUDA path (src/parallel/grad_accum_cuda.cpp); callers check the preconditions above.
void accumulate_main_grad_cuda(torch::Tensor& main, const torch::Tensor& grad);
#endif

}  // namespace megaton::parallel
