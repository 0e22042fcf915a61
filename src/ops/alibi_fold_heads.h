// The folded ALiBi's attention inputs (ops/attention.h) with autograd: q' = [q, q_extra] and k' = [k, k_extra], 8
// extra columns a head, and v; on the way back dq, dk as the first d columns of dq', dk' (no copy: ops::split_qkv's
// kernel reads them in place). On CUDA in bf16/fp16 one kernel writes all three into one [s, b, np, 3, d + 8] buffer
// (kernels/alibi_fold_kernels.cu): v is copied there so that what the attention saves for its backward no longer
// holds the whole QKV output. Elsewhere, or for layouts the kernel does not take, torch::cat makes q' and k', and v is
// passed through.
#pragma once
#include <torch/torch.h>

namespace megaton::ops {

struct FoldedHeads {
  torch::Tensor q, k;  // [s, b, np, d + 8]
  torch::Tensor v;     // [s, b, np, d]
};

/// q, k, v [s, b, np, d]; q_extra [8] (every row's and head's extra query columns); k_extra [s, 1, np, 8] (the key's,
/// per position) -> q', k', v. The extras get no gradient.
FoldedHeads fold_heads(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& q_extra, const torch::Tensor& k_extra);

#ifdef MEGATON_HAVE_CUDA
/// Whether fold_heads_fused takes these: CUDA, bf16 or fp16, one dtype and device, q, k, v [s, b, np, d] with
/// d % 8 == 0, the rows of each ([s, b] flattened) one stride apart, heads and rows 16-byte aligned; q_extra [8] and
/// k_extra [s, 1, np, 8] contiguous.
bool fold_heads_fused_supported(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const torch::Tensor& q_extra, const torch::Tensor& k_extra);
/// fold_heads' forward by the kernel (no autograd); requires fold_heads_fused_supported. q', k', v are views of one
/// [s, b, np, 3, d + 8] buffer (v its last part's first d columns).
FoldedHeads fold_heads_fused(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& q_extra, const torch::Tensor& k_extra);
#endif

}  // namespace megaton::ops
