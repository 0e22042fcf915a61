// Causal attention within each of several sequences packed end to end (--reset-attention-mask's documents), through
// ATen's variable-length flash kernels: the blocks across sequences are never computed. Autograd through ATen's flash
// backward, which regenerates the forward's dropout from the philox state the forward returns.
#pragma once
#include <torch/torch.h>

namespace megaton::ops {

/// q, k, v [t, heads, d] half precision on the GPU (t tokens, unit last stride); cu_seqlens [n + 1] int32 on the same
/// device: sequence i is tokens [cu[i], cu[i+1]); max_len the longest one's length. Scale 1/sqrt(d); dropout_p drawn
/// from the device's default generator (callers swap theirs in). Returns the context [t, heads, d].
torch::Tensor varlen_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                      const torch::Tensor& cu_seqlens, int64_t max_len, double dropout_p);

}  // namespace megaton::ops
