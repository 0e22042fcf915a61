// The CUDA path of BlockwiseAdam8bit::step: kernels/adam8bit_kernels.cu on the current CUDA stream.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cmath>
#include <stdexcept>

#include "adam8bit_kernels.h"  // kernels/
#include "core/error.h"
#include "optim/adam8bit.h"

namespace megaton::optim {

static_assert(BlockwiseAdam8bit::kBlock == kernels::kAdam8bitBlock, "optim/adam8bit.h and the kernel disagree");

void BlockwiseAdam8bit::step_quantized_cuda(const torch::Tensor& master, const torch::Tensor& grad,
                                            const AdamScalars& s) {
  MEGATON_ASSERT(master.is_cuda() && grad.is_cuda() && master.is_contiguous() && grad.is_contiguous() &&
                     master.scalar_type() == torch::kFloat32 && grad.scalar_type() == torch::kFloat32 &&
                     codes_[0].device() == master.device(),
                 "8-bit Adam: masters, gradients and state must be contiguous fp32 on one CUDA device");
  const auto& h = s.hyper;
  kernels::Adam8bitScalars k{};
  k.beta1 = static_cast<float>(h.beta1);
  k.beta2 = static_cast<float>(h.beta2);
  k.one_minus_beta1 = 1.0f - k.beta1;
  k.one_minus_beta2 = 1.0f - k.beta2;
  const float c2 = std::sqrt(static_cast<float>(h.bias_correction2));
  k.eps_c2 = c2 * static_cast<float>(h.eps);
  k.step_size = static_cast<float>(-h.lr) * c2 / static_cast<float>(h.bias_correction1);
  k.decay_factor = 1.0f - static_cast<float>(h.lr) * static_cast<float>(h.weight_decay);
  k.weight_decay = h.weight_decay > 0;
  const c10::cuda::CUDAGuard device_guard(master.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(master.device().index()).stream();
  try {
    kernels::adam8bit_step(master.data_ptr<float>(), grad.data_ptr<float>(), codes_[0].data_ptr<uint8_t>(),
                           codes_[1].data_ptr<uint8_t>(), absmax_[0].data_ptr<float>(), absmax_[1].data_ptr<float>(),
                           map_[0].data_ptr<float>(), map_[1].data_ptr<float>(), block_start_.data_ptr<int64_t>(),
                           block_len_.data_ptr<int64_t>(), block_decay_.data_ptr<bool>(), num_blocks(), k, stream);
  } catch (const std::exception& e) {
    throw RuntimeError(::megaton::str("8-bit Adam: ", e.what()));
  }
}

}  // namespace megaton::optim
