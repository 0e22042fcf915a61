// Backward of act = gelu_tanh(pre) where pre = x w^T + b: d_pre and the bias gradient db = d_pre summed over rows.
// On CUDA bf16/fp16 one kernel does both (kernels/gelu_bias_grad_kernels.cu: d_pre is not read a second time for the
// sum); everywhere else ATen's gelu_backward + sum(0), which the kernel matches to rounding. bias_grad: the same
// column sums alone, for the linear layers' biases.
#pragma once
#include <torch/torch.h>

#include <utility>

#include "ops/linear.h"  // MainGrad

namespace megaton::ops {

/// d_act, pre [T, f] -> (d_pre [T, f], db [f]), in d_act's dtype. `main` (every function here): where the kernel
/// runs and main_grad_takes_sums(main) holds, the column sums are added into main (written on its first write of the
/// iteration) in fp32, and db is returned undefined; otherwise db is returned and main left alone (the gradient then
/// reaches the main grad through DataParallel's hook).
std::pair<torch::Tensor, torch::Tensor> gelu_backward_bias_grad(const torch::Tensor& d_act, const torch::Tensor& pre,
                                                                const MainGrad& main = {});

/// dy [T, n] -> db [n] = dy summed over rows (a linear layer's bias gradient), in dy's dtype: the column-sum kernel
/// where gelu_bias_grad_fused_supported(dy, dy) holds, else ATen's sum(0) (which the kernel matches to summation
/// order).
torch::Tensor bias_grad(const torch::Tensor& dy, const MainGrad& main = {});

/// ATen's two ops: the reference of the fused kernel (tests, benchmark) and the path for what it does not take.
std::pair<torch::Tensor, torch::Tensor> gelu_backward_bias_grad_aten(const torch::Tensor& d_act,
                                                                     const torch::Tensor& pre);

#ifdef MEGATON_HAVE_CUDA
}  // namespace megaton::ops
#include "gelu_bias_grad_kernels.h"  // kernels/: GeluBiasGradTuning
namespace megaton::ops {

/// Whether the fused kernel takes these: CUDA, bf16 or fp16, one dtype and device, 2-D of one shape, f % 8 == 0.
bool gelu_bias_grad_fused_supported(const torch::Tensor& d_act, const torch::Tensor& pre);
/// The kernel (src/ops/gelu_bias_grad_cuda.cpp); requires gelu_bias_grad_fused_supported. `tuning`: the kernel's
/// (benchmarks and tests try the others; training runs the default).
std::pair<torch::Tensor, torch::Tensor> gelu_backward_bias_grad_fused(const torch::Tensor& d_act,
                                                                      const torch::Tensor& pre,
                                                                      const kernels::GeluBiasGradTuning& tuning = {},
                                                                      const MainGrad& main = {});
/// bias_grad's kernel; requires gelu_bias_grad_fused_supported(dy, dy).
torch::Tensor bias_grad_fused(const torch::Tensor& dy, const MainGrad& main = {});
/// Whether qkv_interleave_bias_grad_fused takes these: CUDA, bf16 or fp16, one dtype and device, [.., np, d] of one
/// shape, d % 8 == 0, each contiguous or the first d columns of a contiguous [.., np, d'] (d' % 8 == 0: the folded
/// ALiBi's dq and dk, ops/attention.h).
bool qkv_interleave_fused_supported(const torch::Tensor& dq, const torch::Tensor& dk, const torch::Tensor& dv);
/// dq, dk, dv [.., np, d] -> (d_qkv [.., np, 3, d], db [np 3 d]): the QKV gradient in Megatron's interleaved layout and
/// its column sums (the QKV bias gradient) in one pass (kernels/gelu_bias_grad_kernels.h); requires
/// qkv_interleave_fused_supported.
std::pair<torch::Tensor, torch::Tensor> qkv_interleave_bias_grad_fused(const torch::Tensor& dq, const torch::Tensor& dk,
                                                                       const torch::Tensor& dv,
                                                                       const MainGrad& main = {});
#endif

}  // namespace megaton::ops
