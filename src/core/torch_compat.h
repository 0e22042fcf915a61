// The one place where LibTorch version differences live: Debian's CPU LibTorch 1.13 here, torch 2.11 (CUDA) on the
// GPU machine. Code elsewhere calls these helpers instead of testing TORCH_VERSION_* itself.
#pragma once
#include <torch/torch.h>
#include <torch/version.h>

#define MEGATON_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace megaton::compat {

/// True when this LibTorch was built with CUDA and a device is visible.
inline bool cuda_available() { return torch::cuda::is_available(); }

/// "1.13.1" / "2.11.0".
inline const char* torch_version() { return TORCH_VERSION; }

/// Fused scaled-dot-product attention exists in ATen from 2.0 on; before that, callers use the explicit softmax path.
constexpr bool kHasSdpa = MEGATON_TORCH_AT_LEAST(2, 0);

/// Element size in bytes of a scalar type (c10::elementSize is spelled differently across versions).
inline size_t element_size(c10::ScalarType t) { return c10::elementSize(t); }

}  // namespace megaton::compat

// ~~~ fused attention (added by the model layer; the only version-dependent call on the attention path) ~~~
namespace megaton::compat {

/// at::scaled_dot_product_attention on LibTorch >= 2.0 (flash / memory-efficient / cuDNN kernels on the GPU):
/// q, k, v [b, heads, s, d]; mask undefined, additive float or bool (true = attend) [.., s, s]; returns [b, heads, s,
/// d]. Dropout uses torch's default generator of the device. Callers check kHasSdpa first; on older LibTorch this is
/// never reached.
inline torch::Tensor scaled_dot_product_attention(const torch::Tensor& q, const torch::Tensor& k,
                                                  const torch::Tensor& v, const torch::Tensor& mask, double dropout_p,
                                                  bool is_causal) {
#if MEGATON_TORCH_AT_LEAST(2, 0)
  c10::optional<at::Tensor> m;
  if (mask.defined()) m = mask;
  return at::scaled_dot_product_attention(q, k, v, m, dropout_p, is_causal);
#else
  (void)q, (void)k, (void)v, (void)mask, (void)dropout_p, (void)is_causal;
  TORCH_INTERNAL_ASSERT(false, "scaled_dot_product_attention needs LibTorch >= 2.0 (check compat::kHasSdpa)");
  return {};
#endif
}

}  // namespace megaton::compat
