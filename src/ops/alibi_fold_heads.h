// The folded ALiBi's widened heads (ops/attention.h) with autograd: q' = [q, q_extra] and k' = [k, k_extra], 8 extra
// columns a head, and on the way back dq, dk as the first d columns of dq', dk' (no copy: ops::split_qkv's kernel
// reads them in place). On CUDA in bf16/fp16 one kernel writes both (kernels/alibi_fold_kernels.cu); elsewhere, or for
// layouts it does not take, torch::cat.
#pragma once
#include <torch/torch.h>

#include <utility>

namespace megaton::ops {

/// q, k [s, b, np, d]; q_extra [8] (every row's and head's extra query columns); k_extra [s, 1, np, 8] (the key's, per
/// position) -> {q', k'} [s, b, np, d + 8], contiguous. The extras get no gradient.
std::pair<torch::Tensor, torch::Tensor> fold_heads(const torch::Tensor& q, const torch::Tensor& k,
                                                   const torch::Tensor& q_extra, const torch::Tensor& k_extra);

#ifdef MEGATON_HAVE_CUDA
/// Whether fold_heads_fused takes these: CUDA, bf16 or fp16, one dtype and device, q and k [s, b, np, d] with d % 8 ==
/// 0, their rows ([s, b] flattened) one stride apart, heads and rows 16-byte aligned; q_extra [8] and k_extra [s, 1,
/// np, 8] contiguous.
bool fold_heads_fused_supported(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& q_extra,
                                const torch::Tensor& k_extra);
/// fold_heads' forward by the kernel (no autograd); requires fold_heads_fused_supported.
std::pair<torch::Tensor, torch::Tensor> fold_heads_fused(const torch::Tensor& q, const torch::Tensor& k,
                                                         const torch::Tensor& q_extra, const torch::Tensor& k_extra);
#endif

}  // namespace megaton::ops
