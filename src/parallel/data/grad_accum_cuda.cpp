// The CUDA path of parallel::accumulate_main_grad: kernels/grad_accum_kernels.cu on the current stream.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "core/error.h"
#include "core/kernel_float_type.h"
#include "grad_accum_kernels.h"  // kernels/
#include "parallel/data/grad_accum.h"

namespace megaton::parallel {

void accumulate_main_grad_cuda(torch::Tensor& main, const torch::Tensor& grad) {
  const auto type = try_kernel_float_type(grad);
  MEGATON_ASSERT(type && main.scalar_type() == torch::kFloat32 && main.is_contiguous() && grad.is_contiguous() &&
                     main.numel() == grad.numel(),
                 "accumulate_main_grad_cuda: main ", main.sizes(), " ", c10::toString(main.scalar_type()), ", grad ",
                 grad.sizes(), " ", c10::toString(grad.scalar_type()));
  const c10::cuda::CUDAGuard device_guard(main.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(main.device().index()).stream();
  try {
    kernels::accumulate_grad_fp32(grad.data_ptr(), *type, main.data_ptr<float>(), main.numel(), stream);
  } catch (const std::runtime_error& e) {
    throw RuntimeError(str("gradient accumulation: ", e.what()));
  }
}

}  // namespace megaton::parallel
