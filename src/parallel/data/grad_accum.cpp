#include "parallel/data/grad_accum.h"

namespace megaton::parallel {

void accumulate_main_grad(torch::Tensor& main, const torch::Tensor& grad) {
#ifdef MEGATON_HAVE_CUDA
  const auto t = grad.scalar_type();
  if (main.is_cuda() && grad.is_cuda() && main.device() == grad.device() && main.is_contiguous() &&
      grad.is_contiguous() && main.scalar_type() == torch::kFloat32 && main.numel() == grad.numel() &&
      (t == torch::kBFloat16 || t == torch::kFloat16 || t == torch::kFloat32)) {
    accumulate_main_grad_cuda(main, grad);
    return;
  }
#endif
  main.add_(grad);
}

}  // namespace megaton::parallel
