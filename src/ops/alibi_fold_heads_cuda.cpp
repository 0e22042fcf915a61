// The CUDA path of ops::fold_heads: kernels/alibi_fold_kernels.cu on the current stream.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <optional>
#include <stdexcept>

#include "alibi_fold_kernels.h"  // kernels/
#include "core/error.h"
#include "ops/alibi_fold_heads.h"
#include "ops/aligned.h"
#include "ops/heads_layout.h"

namespace megaton::ops {

namespace {

// q, k or v [s, b, np, d] as the kernel reads it (ops/heads_layout.h); a row stride of -1 where it cannot.
kernels::HeadsView heads_view(const torch::Tensor& t) {
  const std::optional<HeadsLayout> l = heads_layout(t);
  return {t.data_ptr(), l ? l->row_stride : -1, l ? l->head_stride : 0};
}

}  // namespace

bool fold_heads_fused_supported(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const torch::Tensor& q_extra, const torch::Tensor& k_extra) {
  const auto t = q.scalar_type();
  if (!q.is_cuda() || (t != torch::kBFloat16 && t != torch::kFloat16) || q.dim() != 4 || q.numel() == 0 ||
      q.size(3) % 8 != 0 || k.sizes() != q.sizes() || v.sizes() != q.sizes())
    return false;
  for (const torch::Tensor* p : {&k, &v, &q_extra, &k_extra}) {
    if (p->device() != q.device() || p->scalar_type() != t) return false;
  }
  if (!q_extra.is_contiguous() || q_extra.numel() != 8 || !k_extra.is_contiguous() || k_extra.dim() != 4 ||
      k_extra.size(0) != q.size(0) || k_extra.size(1) != 1 || k_extra.size(2) != q.size(2) || k_extra.size(3) != 8)
    return false;
  for (const torch::Tensor* p : {&q, &k, &v}) {
    if (heads_view(*p).row_stride < 0 || !aligned16(*p)) return false;
  }
  return aligned16(q_extra) && aligned16(k_extra);
}

FoldedHeads fold_heads_fused(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& q_extra, const torch::Tensor& k_extra) {
  MEGATON_ASSERT(fold_heads_fused_supported(q, k, v, q_extra, k_extra), "fold_heads_fused: q ", q.sizes(), " ",
                 c10::toString(q.scalar_type()), ", k ", k.sizes(), ", v ", v.sizes(), ", q_extra ", q_extra.sizes(),
                 ", k_extra ", k_extra.sizes());
  const c10::cuda::CUDAGuard guard(q.device());
  const int64_t s = q.size(0), b = q.size(1), np = q.size(2), d = q.size(3);
  torch::Tensor out = torch::empty({s, b, np, 3, d + 8}, q.options());  // [s, b, np, 3, d + 8]
  try {
    kernels::alibi_fold_heads(heads_view(q), heads_view(k), heads_view(v), q_extra.data_ptr(), k_extra.data_ptr(),
                              out.data_ptr(), s * b, b, np, d,
                              c10::cuda::getCurrentCUDAStream(q.device().index()).stream());
  } catch (const std::exception& e) {
    throw RuntimeError(str("fold_heads_fused: ", e.what()));
  }
  return {out.select(3, 0), out.select(3, 1), out.select(3, 2).narrow(-1, 0, d)};
}

}  // namespace megaton::ops
