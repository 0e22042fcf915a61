// The CUDA path of MixedPrecisionOptimizer's Adam: checks the buffers and launches kernels/adam_kernels.cu on the
// current CUDA stream.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <stdexcept>

#include "adam_kernels.h"  // kernels/
#include "core/error.h"
#include "core/kernel_float_type.h"
#include "optim/adam_step.h"

namespace megaton::optim {

static_assert(kAdamChunk == kernels::kAdamChunk, "optim/adam_step.h and kernels/adam_kernels.h disagree");

namespace {

kernels::FloatType float_type(const torch::Tensor& t) {
  return kernel_float_type(t, "fused Adam");
}

void check_buffer(const torch::Tensor& t, const char* name, const torch::Tensor& master) {
  MEGATON_ASSERT(t.defined(), "fused Adam: ", name, " is undefined");
  MEGATON_ASSERT(
      t.is_cuda() && t.device() == master.device() && t.dim() == 1 && t.numel() == master.numel() && t.is_contiguous(),
      "fused Adam: ", name, " must be a contiguous 1-D tensor of ", master.numel(), " elements on ", master.device(),
      ", got ", t.sizes(), (t.is_contiguous() ? "" : " (not contiguous)"), " on ", t.device());
}

}  // namespace

void adam_step_fused(const torch::Tensor& master, const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq,
                     const torch::Tensor& grad, const torch::Tensor& chunks, const AdamScalars& step,
                     const torch::Tensor& param_out, int packs_per_pass) {
  MEGATON_ASSERT(master.defined() && master.is_cuda(), "fused Adam: the masters must be a CUDA tensor");
  check_buffer(master, "master", master);
  check_buffer(exp_avg, "exp_avg", master);
  check_buffer(exp_avg_sq, "exp_avg_sq", master);
  check_buffer(grad, "grad", master);
  for (const torch::Tensor* t : {&master, &exp_avg, &exp_avg_sq, &grad})
    MEGATON_ASSERT(t->scalar_type() == torch::kFloat32, "fused Adam: master, moments and grad must be fp32, got ",
                   c10::toString(t->scalar_type()));
  MEGATON_ASSERT(chunks.defined() && chunks.is_cuda() && chunks.device() == master.device() &&
                     chunks.scalar_type() == torch::kInt64 && chunks.dim() == 2 && chunks.size(1) == 3 &&
                     chunks.is_contiguous(),
                 "fused Adam: the chunk table must be a contiguous int64 [C, 3] tensor on ", master.device());
  kernels::FloatType out_type = kernels::FloatType::kFloat32;
  if (param_out.defined()) {
    check_buffer(param_out, "param_out", master);
    MEGATON_ASSERT(!param_out.is_same(master), "fused Adam: param_out is the masters themselves; pass none");
    out_type = float_type(param_out);
  }
  kernels::AdamHyper h = step.hyper;
  h.device_grad_scale = nullptr;
  if (step.device_grad_scale.defined()) {
    const torch::Tensor& d = step.device_grad_scale;
    MEGATON_ASSERT(d.device() == master.device() && d.scalar_type() == torch::kFloat32 && d.numel() == 1,
                   "fused Adam: the device grad scale must be one fp32 on ", master.device());
    h.device_grad_scale = d.data_ptr<float>();
  }
  const c10::cuda::CUDAGuard device_guard(master.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(master.device().index()).stream();
  try {
    kernels::adam_step(master.data_ptr<float>(), exp_avg.data_ptr<float>(), exp_avg_sq.data_ptr<float>(),
                       grad.data_ptr<float>(), reinterpret_cast<const kernels::AdamChunk*>(chunks.data_ptr<int64_t>()),
                       chunks.size(0), h, param_out.defined() ? param_out.data_ptr() : nullptr, out_type, stream,
                       kernels::AdamTuning{packs_per_pass});
  } catch (const std::exception& e) {
    throw RuntimeError(::megaton::str("fused Adam: ", e.what()));
  }
}

}  // namespace megaton::optim
