// The CUDA paths of ops::gelu_backward_bias_grad and ops::bias_grad: kernels/gelu_bias_grad_kernels.cu on the current
// stream.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <stdexcept>

#include "core/error.h"
#include "core/kernel_float_type.h"
#include "gelu_bias_grad_kernels.h"  // kernels/
#include "ops/aligned.h"
#include "ops/gelu_bias_grad.h"

namespace megaton::ops {

bool gelu_bias_grad_fused_supported(const torch::Tensor& d_act, const torch::Tensor& pre) {
  const auto t = d_act.scalar_type();
  return d_act.is_cuda() && pre.device() == d_act.device() && (t == torch::kBFloat16 || t == torch::kFloat16) &&
         pre.scalar_type() == t && d_act.dim() == 2 && pre.sizes() == d_act.sizes() && d_act.numel() > 0 &&
         d_act.size(1) % 8 == 0;
}

std::pair<torch::Tensor, torch::Tensor> gelu_backward_bias_grad_fused(const torch::Tensor& d_act,
                                                                      const torch::Tensor& pre) {
  MEGATON_ASSERT(gelu_bias_grad_fused_supported(d_act, pre), "gelu_backward_bias_grad_fused: d_act ", d_act.sizes(),
                 " ", c10::toString(d_act.scalar_type()), ", pre ", pre.sizes(), " ", c10::toString(pre.scalar_type()));
  const c10::cuda::CUDAGuard guard(d_act.device());
  const torch::Tensor dy = aligned_contiguous(d_act), x = aligned_contiguous(pre);  // [T, f]
  const int64_t rows = dy.size(0), cols = dy.size(1);
  torch::Tensor d_pre = torch::empty_like(dy);            // [T, f]
  torch::Tensor db = torch::empty({cols}, dy.options());  // [f]
  const int64_t partials = kernels::gelu_bias_grad_partials(rows, cols);
  torch::Tensor workspace = torch::empty({partials, cols}, dy.options().dtype(torch::kFloat32));  // [P, f]
  try {
    kernels::gelu_backward_bias_grad(dy.data_ptr(), x.data_ptr(), d_pre.data_ptr(), db.data_ptr(),
                                     workspace.data_ptr<float>(), partials, kernel_float_type(dy, "gelu bias grad"),
                                     rows, cols, c10::cuda::getCurrentCUDAStream(dy.device().index()).stream());
  } catch (const std::exception& e) {
    throw RuntimeError(str("gelu_backward_bias_grad: ", e.what()));
  }
  return {d_pre, db};
}

torch::Tensor bias_grad_fused(const torch::Tensor& dy_in) {
  MEGATON_ASSERT(gelu_bias_grad_fused_supported(dy_in, dy_in), "bias_grad_fused: dy ", dy_in.sizes(), " ",
                 c10::toString(dy_in.scalar_type()));
  const c10::cuda::CUDAGuard guard(dy_in.device());
  const torch::Tensor dy = aligned_contiguous(dy_in);  // [T, n]
  const int64_t rows = dy.size(0), cols = dy.size(1);
  torch::Tensor db = torch::empty({cols}, dy.options());  // [n]
  const int64_t partials = kernels::gelu_bias_grad_partials(rows, cols);
  torch::Tensor workspace = torch::empty({partials, cols}, dy.options().dtype(torch::kFloat32));  // [P, n]
  try {
    kernels::bias_grad(dy.data_ptr(), db.data_ptr(), workspace.data_ptr<float>(), partials,
                       kernel_float_type(dy, "bias grad"), rows, cols,
                       c10::cuda::getCurrentCUDAStream(dy.device().index()).stream());
  } catch (const std::exception& e) {
    throw RuntimeError(str("bias_grad: ", e.what()));
  }
  return db;
}

}  // namespace megaton::ops
