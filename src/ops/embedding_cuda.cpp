// The CUDA path of ops::accumulate_embedding_grad: ATen's stable sort of the ids, then
// kernels::embedding_grad_accumulate on the current stream.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "core/kernel_float_type.h"
#include "embedding_grad_kernels.h"  // kernels/
#include "ops/embedding.h"

namespace megaton::ops {

bool accumulate_embedding_grad_cuda(const torch::Tensor& main, const torch::Tensor& ids, const torch::Tensor& grad) {
  if (!main.is_cuda() || ids.device() != main.device() || grad.device() != main.device()) return false;
  if (!main.is_contiguous()) return false;
  const auto type = try_kernel_float_type(grad);
  if (!type) return false;
  const c10::cuda::CUDAGuard guard(main.device());
  const torch::Tensor g = grad.contiguous();  // [n, h]
  const auto [sorted, order] = torch::sort(ids.to(torch::kInt64), /*stable=*/true, /*dim=*/0, /*descending=*/false);
  kernels::embedding_grad_accumulate(sorted.data_ptr<int64_t>(), order.data_ptr<int64_t>(), g.data_ptr(), *type,
                                     g.size(0), g.size(1), main.data_ptr<float>(), main.size(0),
                                     c10::cuda::getCurrentCUDAStream(main.device().index()).stream());
  return true;
}

}  // namespace megaton::ops
