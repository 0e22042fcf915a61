// The CUDA path of ops::weight_grad's accumulation: one GEMM with bf16/fp16 inputs and an fp32 output that it adds to
// (beta = 1) or, on a main grad's first write of an iteration, overwrites (beta = 0), on ATen's cuBLAS handle and
// current stream: cublasGemmEx, or the cuBLASLt algorithm ops::gemm_tuner() measured faster for the shape
// (ops::lt::wgrad_fp32_tuned).
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <climits>

#include "core/error.h"
#include "ops/cublaslt_gemm.h"
#include "ops/linear.h"

namespace megaton::ops {

bool accumulate_weight_grad_cuda(const torch::Tensor& main, const torch::Tensor& dy, const torch::Tensor& x,
                                 bool overwrite) {
  const auto t = dy.scalar_type();
  if (!main.is_cuda() || !dy.is_cuda() || !x.is_cuda() || dy.device() != main.device() || x.device() != main.device())
    return false;
  if ((t != torch::kBFloat16 && t != torch::kFloat16) || x.scalar_type() != t) return false;
  if (!main.is_contiguous() || !dy.is_contiguous() || !x.is_contiguous() || dy.dim() != 2 || x.dim() != 2) return false;
  const int64_t rows = dy.size(0), out = dy.size(1), in = x.size(1);
  if (rows > INT_MAX || out > INT_MAX || in > INT_MAX) return false;
  if (rows == 0) {
    if (overwrite) main.zero_();  // the empty product
    return true;
  }
  const c10::cuda::CUDAGuard guard(main.device());
  torch::Tensor target = main;
  lt::wgrad_fp32_tuned(dy, x, target, overwrite);  // cublasGemmEx or a faster cuBLASLt algorithm (ops::gemm_tuner)
  return true;
}

kernels::ColumnSumOut column_sum_out(const MainGrad& m, int64_t n, const torch::TensorOptions& vector_options,
                                     torch::Tensor& vector) {
  if (main_grad_takes_sums(m, n, vector_options.device()))
    return kernels::ColumnSumOut(m.grad.data_ptr<float>(), consume_overwrite(m));
  vector = torch::empty({n}, vector_options);
  return kernels::ColumnSumOut(vector.data_ptr());
}

}  // namespace megaton::ops
