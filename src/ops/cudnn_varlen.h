// cuDNN's SDPA over ragged (THD) tensors, as ATen exposes it: at::_cudnn_attention_forward / _backward with
// cumulative sequence lengths (PyTorch's nested-tensor and varlen_attn paths). Their argument lists have changed across
// releases, so they are called through the dispatcher with arguments matched by name to the schema this LibTorch has
// (a missing or renamed required argument is an InternalError at the call, never a build break or a wrong argument).
#pragma once
#include <torch/torch.h>

#include "core/torch_compat.h"

namespace megaton::ops::cudnn_varlen {

/// Both entry points exist here and take cumulative sequence lengths (checked once per process).
bool available();

/// q, k, v [t, heads, d] half, contiguous; cu_seqlens [n + 1] int32; causal within each sequence; scale 1/sqrt(d);
/// dropout from the device's default generator. rng_state and unused of the result hold cuDNN's philox seed and offset.
compat::VarlenFlashOut forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& cu_seqlens, int64_t max_len, double dropout_p);

/// The backward of forward(): (dq, dk, dv), each [t, heads, d].
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> backward(const torch::Tensor& grad_out, const torch::Tensor& q,
                                                                 const torch::Tensor& k, const torch::Tensor& v,
                                                                 const compat::VarlenFlashOut& f,
                                                                 const torch::Tensor& cu_seqlens, int64_t max_len,
                                                                 double dropout_p);

}  // namespace megaton::ops::cudnn_varlen
