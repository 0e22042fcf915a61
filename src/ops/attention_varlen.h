// Causal attention within each of several sequences packed end to end (--reset-attention-mask's documents), through
// one of two variable-length kernels: ATen's flash kernels (FlashAttention-2) or cuDNN's SDPA over ragged (THD)
// tensors. Either way the blocks across sequences are never computed. Autograd through the kernel's own backward,
// which regenerates the forward's dropout from the philox state the forward returns.
#pragma once
#include <torch/torch.h>

namespace megaton::ops {

/// Which variable-length kernel runs the documents (--varlen-attention-kernel).
enum class VarlenKernel {
  kFlash,  // at::_flash_attention_forward/_backward with cumulative lengths (LibTorch >= 2.2)
  kCudnn,  // at::_cudnn_attention_forward/_backward with cum_seq_q/cum_seq_k (cuDNN ragged SDPA, newer LibTorch)
};

/// "flash" | "cudnn" -> the kernel; anything else: UsageError naming --varlen-attention-kernel.
VarlenKernel parse_varlen_kernel(const std::string& name);
const char* varlen_kernel_name(VarlenKernel k);

/// Whether this LibTorch's ATen has the kernel's entry points (cuDNN's: _cudnn_attention_forward and _backward taking
/// cumulative sequence lengths, looked up by name in the dispatcher; flash's: compat::kHasVarlenFlash).
bool varlen_kernel_available(VarlenKernel k);

/// q, k, v [t, heads, d] half precision on the GPU (t tokens, unit last stride); cu_seqlens [n + 1] int32 on the same
/// device: sequence i is tokens [cu[i], cu[i+1]); max_len the longest one's length. Scale 1/sqrt(d); dropout_p drawn
/// from the device's default generator (callers swap theirs in). Returns the context [t, heads, d], contiguous.
torch::Tensor varlen_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                      const torch::Tensor& cu_seqlens, int64_t max_len, double dropout_p,
                                      VarlenKernel kernel = VarlenKernel::kFlash);

}  // namespace megaton::ops
