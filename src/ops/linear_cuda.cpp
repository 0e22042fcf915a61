// The CUDA path of ops::weight_grad's accumulation: one cublasGemmEx with bf16/fp16 inputs and an fp32 output that it
// adds to (beta = 1) or, on a main grad's first write of an iteration, overwrites (beta = 0), on ATen's cuBLAS handle
// and current stream. cuBLAS is column-major: main^T [in, out] = x_cm [in, T] . dy_cm^T [T, out] (+ main^T).
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cublas_v2.h>

#include <climits>

#include "core/error.h"
#include "ops/linear.h"

namespace megaton::ops {

namespace {

cudaDataType_t cuda_type(torch::ScalarType t) {
  return t == torch::kBFloat16 ? CUDA_R_16BF : CUDA_R_16F;
}

}  // namespace

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
  const float alpha = 1.0f, beta = overwrite ? 0.0f : 1.0f;
  const cudaDataType_t ab = cuda_type(t);
  const cublasStatus_t st =
      cublasGemmEx(at::cuda::getCurrentCUDABlasHandle(), CUBLAS_OP_N, CUBLAS_OP_T, int(in), int(out), int(rows), &alpha,
                   x.data_ptr(), ab, int(in), dy.data_ptr(), ab, int(out), &beta, main.data_ptr(), CUDA_R_32F, int(in),
                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP);
  MEGATON_CHECK(st == CUBLAS_STATUS_SUCCESS, RuntimeError,
                "weight-gradient GEMM into the fp32 main grad: cuBLAS status ", int(st), " (m ", in, ", n ", out,
                ", k ", rows, ")");
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
