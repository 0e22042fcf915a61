// The architecture as stored in a checkpoint's meta/model_config.json (the keys are Megatron's flag names), built
// from and applied to cli::ModelArgs. The training loop saves model_config_json(args, vocab) and passes the same
// object as LoadOptions::expected_model_config; import-hf builds it from a Hugging Face config.json.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>

#include "cli/arguments.h"

namespace megaton::checkpoint {

/// Keys: num_layers, hidden_size, num_attention_heads, kv_channels, ffn_hidden_size, max_position_embeddings,
/// position_embedding_type, embed_layernorm, glu_activation, openai_gelu, no_bias_gelu_fusion, layernorm_epsilon,
/// apply_residual_connection_post_layernorm, untie_embeddings_and_output_weights, vocab_size (the tokenizer's,
/// unpadded). Derived fields (kv_channels, ffn_hidden_size) are written as resolved (0 -> hidden/heads, 4*hidden).
nlohmann::json model_config_json(const cli::ModelArgs& m, int64_t vocab_size);

/// Sets the fields of `m` present in `j` (the inverse of model_config_json); returns the vocab size (0 if absent).
/// CheckpointError naming the key for a value of the wrong JSON type.
int64_t apply_model_config(const nlohmann::json& j, cli::ModelArgs& m);

}  // namespace megaton::checkpoint
