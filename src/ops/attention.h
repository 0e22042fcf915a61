// Causal self-attention core (Megatron's CoreAttention), given this rank's heads: softmax(Q K^T / sqrt(d) + bias)
// V with a causal mask (or a given per-sample mask: --reset-attention-mask's document-wise one), where bias is ALiBi's
// or none. Two paths with the same result:
//   * fused: at::scaled_dot_product_attention (LibTorch >= 2.0: flash / memory-efficient / cuDNN on the GPU),
//     is_causal, or an additive float mask for ALiBi, or a boolean mask for a given one (which the causal-only flash
//     kernels do not take: ATen picks a kernel that does);
//   * explicit (LibTorch 1.13, and on request): baddbmm with Megatron's query-key layer scaling (scores divided by
//     sqrt(d) * layer_number, the softmax input multiplied back by layer_number in fp32), masked fill -10000, softmax.
// Attention dropout draws from the TP generator (differs across TP ranks, as Megatron's tracker does).
#pragma once
#include <torch/torch.h>

namespace megaton::ops {

struct AttentionOptions {
  /// Megatron's coeff: the layer number (1-based) with query-key layer scaling, else 1.
  double layer_scale = 1.0;
  /// Softmax in fp32 for half inputs (always true when layer_scale != 1, as in Megatron).
  bool softmax_in_fp32 = false;
  double dropout_p = 0.0;
  bool training = false;
  at::Generator* dropout_generator = nullptr;  // required when training with dropout_p > 0
  /// ALiBi bias [heads, 1, s_k] for this rank's heads (float), or undefined.
  torch::Tensor alibi;
  /// [b, 1, s, s] bool, true where query i may not attend to key j (Megatron's attention_mask; it must hold the causal
  /// mask too), in place of the causal mask; undefined: causal.
  torch::Tensor mask;
  /// Use the fused kernel when LibTorch has it.
  bool use_fused = true;
};

/// Megatron's --reset-attention-mask mask from each token's document index within its sample, document_ids [b, s]
/// int: [b, 1, s, s] bool, true where query i may not attend to key j (j > i, or another document).
torch::Tensor document_mask(const torch::Tensor& document_ids);

/// q, k, v [s, b, heads, d] -> context [s, b, heads * d].
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const AttentionOptions& o);

/// The explicit path, always (tests compare it with the fused one where LibTorch has it).
torch::Tensor causal_attention_explicit(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                        const AttentionOptions& o);

}  // namespace megaton::ops
