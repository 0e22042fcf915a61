// The GPT architecture, as Megatron-DeepSpeed's _add_network_size_args and its BigScience variants name it: sizes,
// positions, activations, dropout, initialisation and activation recomputation. Field names follow the flags
// (--num-layers -> num_layers); their defaults are Megatron's. cli/ maps the flags onto these fields; validate()
// applies Megatron's rules and fills the derived sizes.
#pragma once
#include <cstdint>
#include <string>

namespace megaton::model {

struct GptOptions {
  int num_layers = 0;
  int hidden_size = 0;
  int ffn_hidden_size = 0;  // 0 -> 4 x hidden (validate); GLU's doubled fc1 is derived in the model
  int num_attention_heads = 0;
  int kv_channels = 0;              // 0 -> hidden / heads (validate)
  int max_position_embeddings = 0;  // 0 -> seq_length for learned positions (validate)
  int seq_length = 0;
  int make_vocab_size_divisible_by = 128;
  int pad_vocab_size_to = 0;  // 0: pad to the multiple above instead
  double layernorm_epsilon = 1e-5;
  std::string position_embedding_type = "absolute";  // absolute | rotary | alibi
  bool embed_layernorm = false;
  std::string glu_activation;  // "" | geglu | swiglu | reglu | liglu
  bool openai_gelu = false;
  // Megatron's fused bias-GELU is the tanh approximation; without the fusion (--no-bias-gelu-fusion) the GELU is the
  // exact (erf) one. Ignored by GLU activations and --openai-gelu.
  bool bias_gelu_fusion = true;
  bool apply_residual_connection_post_layernorm = false;
  double hidden_dropout = 0.1;
  double attention_dropout = 0.1;
  double init_method_std = 0.02;
  bool init_method_xavier_uniform = false;
  /// The word embedding alone is initialised xavier-uniform over its global (padded) shape: the fork does this, with
  /// an embedding LayerNorm, under --use-bnb-optimizer.
  bool xavier_word_embedding = false;
  // muP (--mup, the parametrisation of the fork's tr14-mup runs): embeddings x mup_input_mult, the final LayerNorm's
  // output x mup_output_mult / hidden_size, attention scores x mup_attn_mult / head_dim (not 1/sqrt(head_dim)),
  // weights drawn with std init_method_std / sqrt(width multiplier) where both dimensions grow with the width, and
  // those weights' Adam learning rate / width multiplier. Width multipliers count from a base model of hidden
  // 2 x mup_base_hidden_size and ffn 2 x mup_base_ffn_hidden_size (the fork's make_base_shapes takes the larger of
  // its two probe models as the base).
  bool mup = false;
  double mup_input_mult = 1.0;
  double mup_output_mult = 1.0;
  double mup_attn_mult = 1.0;
  int mup_base_hidden_size = 64;
  int mup_base_ffn_hidden_size = 256;
  /// muP's width multiplier of a weight whose fan-in is `fan_in` hidden (or ffn) units.
  double mup_width_mult_hidden() const { return double(hidden_size) / (2.0 * mup_base_hidden_size); }
  double mup_width_mult_ffn() const { return double(ffn_hidden_size) / (2.0 * mup_base_ffn_hidden_size); }
  bool checkpoint_activations = false;  // recompute each chunk of layers in the backward
  int checkpoint_num_layers = 1;
  bool apply_query_key_layer_scaling = true;
  bool attention_softmax_in_fp32 = false;
  bool fp32_residual_connection = false;  // 16-bit layers with an fp32 residual stream (needs --fp16/--bf16)
  bool untie_embeddings_and_output_weights = false;

  /// Checks the flags alone (sizes > 0, heads divide hidden, known position and GLU types, dropout in [0, 1), ...)
  /// and fills kv_channels, ffn_hidden_size and max_position_embeddings; UsageError names the flag. Idempotent.
  void validate();

  /// The padded vocabulary: --pad-vocab-size-to, or the smallest multiple of make_vocab_size_divisible_by x TP that
  /// holds `vocab`. UsageError where --pad-vocab-size-to is too small or not divisible by TP.
  int64_t padded_vocab_size(int64_t vocab, int tp) const;
};

}  // namespace megaton::model
