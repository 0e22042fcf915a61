// The one place where LibTorch version differences live: Debian's CPU LibTorch 1.13 here, torch 2.11 (CUDA) on the
// GPU machine. Code elsewhere calls these helpers instead of testing TORCH_VERSION_* itself.
#pragma once
#include <torch/torch.h>
#include <torch/version.h>

#define MEGATON_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace megaton::compat {

/// True when this LibTorch was built with CUDA and a device is visible.
inline bool cuda_available() {
  return torch::cuda::is_available();
}

/// "1.13.1" / "2.11.0".
inline const char* torch_version() {
  return TORCH_VERSION;
}

/// Fused scaled-dot-product attention exists in ATen from 2.0 on; before that, callers use the explicit softmax path.
constexpr bool kHasSdpa = MEGATON_TORCH_AT_LEAST(2, 0);

/// Element size in bytes of a scalar type (c10::elementSize is spelled differently across versions).
inline size_t element_size(c10::ScalarType t) {
  return c10::elementSize(t);
}

}  // namespace megaton::compat

// ~~~ fused attention (added by the model layer; the only version-dependent call on the attention path) ~~~
namespace megaton::compat {

/// SDPA takes an explicit softmax scale (instead of 1/sqrt(q's head size)) from LibTorch 2.1 on.
constexpr bool kHasSdpaScale = MEGATON_TORCH_AT_LEAST(2, 1);

/// at::scaled_dot_product_attention on LibTorch >= 2.0 (flash / memory-efficient / cuDNN kernels on the GPU):
/// q, k [b, heads, s, d], v [b, heads, s, dv]; mask undefined, additive float or bool (true = attend) [.., s, s];
/// returns [b, heads, s, dv]. Dropout uses torch's default generator of the device. `scale` (> 0; needs
/// kHasSdpaScale): the scores' scale, else 1/sqrt(d). Callers check kHasSdpa first; on older LibTorch this is never
/// reached.
inline torch::Tensor scaled_dot_product_attention(const torch::Tensor& q, const torch::Tensor& k,
                                                  const torch::Tensor& v, const torch::Tensor& mask, double dropout_p,
                                                  bool is_causal, double scale = 0.0) {
#if MEGATON_TORCH_AT_LEAST(2, 1)
  c10::optional<at::Tensor> m;
  if (mask.defined()) m = mask;
  c10::optional<double> sc;
  if (scale > 0.0) sc = scale;
  return at::scaled_dot_product_attention(q, k, v, m, dropout_p, is_causal, sc);
#elif MEGATON_TORCH_AT_LEAST(2, 0)
  TORCH_INTERNAL_ASSERT(scale <= 0.0, "an explicit attention scale needs LibTorch >= 2.1 (check kHasSdpaScale)");
  c10::optional<at::Tensor> m;
  if (mask.defined()) m = mask;
  return at::scaled_dot_product_attention(q, k, v, m, dropout_p, is_causal);
#else
  (void)q, (void)k, (void)v, (void)mask, (void)dropout_p, (void)is_causal, (void)scale;
  TORCH_INTERNAL_ASSERT(false, "scaled_dot_product_attention needs LibTorch >= 2.0 (check compat::kHasSdpa)");
  return {};
#endif
}

}  // namespace megaton::compat

// ~~~ variable-length flash attention (ATen's private entry points; their schemas gained keyword arguments over the
// releases, all defaulted, so only the leading ones are passed) ~~~
namespace megaton::compat {

/// at::_flash_attention_forward with cumulative sequence lengths exists (with these arguments) from LibTorch 2.2 on.
constexpr bool kHasVarlenFlash = MEGATON_TORCH_AT_LEAST(2, 2);

/// The outputs of a variable-length flash forward that its backward needs.
struct VarlenFlashOut {
  torch::Tensor out, logsumexp, rng_state, unused;
};

/// q, k, v [t, heads, d] half, unit last stride; cu_seqlens [n + 1] int32 (the same for queries and keys); causal
/// within each sequence; dropout_p from torch's default generator of the device; scale 1/sqrt(d).
inline VarlenFlashOut varlen_flash_forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                           const torch::Tensor& cu_seqlens, int64_t max_len, double dropout_p) {
#if MEGATON_TORCH_AT_LEAST(2, 2)
  auto r = at::_flash_attention_forward(q, k, v, cu_seqlens, cu_seqlens, max_len, max_len, dropout_p,
                                        /*is_causal=*/true, /*return_debug_mask=*/false);
  return {std::get<0>(r), std::get<1>(r), std::get<2>(r), std::get<3>(r)};
#else
  (void)q, (void)k, (void)v, (void)cu_seqlens, (void)max_len, (void)dropout_p;
  TORCH_INTERNAL_ASSERT(false, "variable-length flash attention needs LibTorch >= 2.2 (check compat::kHasVarlenFlash)");
  return {};
#endif
}

/// The backward of varlen_flash_forward: (dq, dk, dv), each [t, heads, d].
inline std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> varlen_flash_backward(
    const torch::Tensor& grad_out, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
    const VarlenFlashOut& f, const torch::Tensor& cu_seqlens, int64_t max_len, double dropout_p) {
#if MEGATON_TORCH_AT_LEAST(2, 2)
  return at::_flash_attention_backward(grad_out, q, k, v, f.out, f.logsumexp, cu_seqlens, cu_seqlens, max_len, max_len,
                                       dropout_p, /*is_causal=*/true, f.rng_state, f.unused);
#else
  (void)grad_out, (void)q, (void)k, (void)v, (void)f, (void)cu_seqlens, (void)max_len, (void)dropout_p;
  TORCH_INTERNAL_ASSERT(false, "variable-length flash attention needs LibTorch >= 2.2 (check compat::kHasVarlenFlash)");
  return {};
#endif
}

}  // namespace megaton::compat
