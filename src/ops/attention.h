// Causal self-attention core (Megatron's CoreAttention), given this rank's heads: softmax(Q K^T / sqrt(d) + bias)
// V with a causal mask (or, with --reset-attention-mask, causal within each document packed in a sample), where bias
// is ALiBi's or none. Three paths with the same result:
//   * variable-length (documents, half precision on the GPU, LibTorch >= 2.2, no ALiBi): ATen's flash kernel over the
//     packed documents (at::_flash_attention_forward with cumulative lengths), each document its own causal sequence:
//     the blocks across documents are skipped, not computed and masked (cuDNN's ragged SDPA through ATen is 60-95x
//     slower, with wrong gradients past 64-token documents, on torch 2.11);
//   * fused: at::scaled_dot_product_attention (LibTorch >= 2.0: flash / memory-efficient / cuDNN on the GPU),
//     is_causal, or the documents' boolean mask (which the causal-only flash kernels do not take: ATen picks a kernel
//     that does), or for ALiBi either
//       - folded into the heads (the default on the GPU in half precision without documents, LibTorch >= 2.1): the
//         key-only bias b[h, j] (Megatron's slope_h * j) as 8 extra head dimensions, q' = [q, 1, 1, 1, 0..] and k' =
//         [k, three bf16/fp16 parts of b[h, j] sqrt(d), 0..], so that q' k' / sqrt(d) = q k / sqrt(d) + b to ~2^-24
//         relative, through is_causal: the kernel skips the masked half and reads no [s, s] mask (docs/model.md:
//         1.25-1.6x faster attention than the mask on an H100, and the bias no longer rounded to 16 bits);
//       - or as an additive float mask [1 or b, heads, s, s] in q's dtype (with documents, --no-alibi-fold), the
//         bias rounded to q's dtype as Megatron's baddbmm rounds it;
//   * explicit (LibTorch 1.13, and on request): baddbmm with Megatron's query-key layer scaling (scores divided by
//     sqrt(d) * layer_number, the softmax input multiplied back by layer_number in fp32), masked fill -10000, softmax.
// Attention dropout draws from the TP generator (differs across TP ranks, as Megatron's tracker does).
#pragma once
#include <torch/torch.h>

#include <memory>

namespace megaton::ops {

/// --reset-attention-mask's documents in one micro-batch's samples, made once per forward and shared by its layers.
class Documents {
 public:
  Documents() = default;  // none: plain causal attention
  /// From each token's document index in its sample, ids [b, s] int (non-decreasing along s), for attention on
  /// `device`. The ids are read on the host: pass host ids (pinned, for a GPU) where a device sync matters.
  /// `prefix` [b, s] bool (or undefined): the tokens of each document's prefix, which attend to each other both ways
  /// (prefix-LM, the non-causal decoder's inputs); a document's prefix tokens come first in it.
  Documents(const torch::Tensor& ids, torch::Device device, const torch::Tensor& prefix = torch::Tensor());
  bool defined() const { return ids_.defined(); }
  bool has_prefix() const { return prefix_.defined(); }
  const torch::Tensor& ids() const { return ids_; }                // [b, s] int64 on the device
  const torch::Tensor& prefix() const { return prefix_; }          // [b, s] bool on the device, or undefined
  const torch::Tensor& cu_seqlens() const { return cu_seqlens_; }  // [n + 1] int32: document starts in [b * s], b * s
  int64_t max_length() const { return max_length_; }               // the longest document's token count
  /// Megatron's mask of the documents, [b, 1, s, s] bool, true where query i may not attend to key j (another
  /// document, or j > i unless both are in the document's prefix): built on first use, once for all copies of this
  /// object.
  const torch::Tensor& mask() const;
  /// The same documents with a mask of their own, not yet built: a micro-batch keeps its documents for the whole
  /// iteration, and each forward builds (and frees) its own mask.
  Documents per_forward() const;

 private:
  torch::Tensor ids_, cu_seqlens_, prefix_;
  int64_t max_length_ = 0;
  std::shared_ptr<torch::Tensor> mask_;  // the mask's cache, shared by copies (none without documents)
};

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
  /// Where the fused path keeps what it makes of ALiBi's bias for the other layers of the same forward: the additive
  /// mask (with the causal or the documents' mask), [1 or b, heads, s, s] in q's dtype (SDPA saves its mask for the
  /// backward, so one mask per forward instead of one per layer: 128 MiB a layer at s 2048, 16 heads, bf16), or the
  /// folded key columns [s, 1, heads, 8]. Null: each call makes its own. Holders make a fresh one per forward
  /// (GptStage::layer_context).
  std::shared_ptr<torch::Tensor> alibi_mask_cache;
  /// Attention causal within each of these documents, in place of causal over the whole sample; undefined: causal.
  Documents documents;
  /// Use the fused kernels when LibTorch has them.
  bool use_fused = true;
  /// With documents: the variable-length kernel where it applies (else the fused kernel with the documents' mask).
  /// The default (the model's too; --no-varlen-attention clears it).
  bool use_varlen = true;
  /// ALiBi folded into the heads where it applies (uses_alibi_fold; else its mask). --no-alibi-fold clears it.
  bool alibi_fold = true;
};

/// Megatron's --reset-attention-mask mask from each token's document index within its sample, document_ids [b, s]
/// int: [b, 1, s, s] bool, true where query i may not attend to key j (j > i, or another document).
/// With `prefix` [b, s] bool: query i also attends to a later key j of its document when both are prefix tokens.
torch::Tensor document_mask(const torch::Tensor& document_ids, const torch::Tensor& prefix = torch::Tensor());

/// Whether causal_attention takes the variable-length path for these inputs and options.
bool uses_varlen(const torch::Tensor& q, const AttentionOptions& o);

/// Whether causal_attention folds ALiBi's bias into the heads for these inputs and options (the fused path, a CUDA q
/// in bf16/fp16, ALiBi without documents, d % 8 == 0, LibTorch >= 2.1, alibi_fold).
bool uses_alibi_fold(const torch::Tensor& q, const AttentionOptions& o);

/// q, k, v [s, b, heads, d] -> context [s, b, heads * d].
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const AttentionOptions& o);

/// The explicit path, always (tests compare it with the fused one where LibTorch has it).
torch::Tensor causal_attention_explicit(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                        const AttentionOptions& o);

}  // namespace megaton::ops
