// The host-side scalars of one Adam step (double; the fused kernel's launcher rounds what it uses to fp32 where ATen
// does). Shared by kernels/adam_kernels.h and optim::AdamScalars (src/optim/adam_step.h), so plain C++: CPU builds
// include it too.
#pragma once

namespace megaton::kernels {

struct AdamHyper {
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  double bias_correction1 = 1, bias_correction2 = 1;  // 1 - beta^step
  double grad_scale = 1;                              // multiplies the gradient first (the clip coefficient)
  const float* device_grad_scale = nullptr;           // not null: one fp32 in device memory used instead of grad_scale
};

}  // namespace megaton::kernels
