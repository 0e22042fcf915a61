#include "checkpoint/model_config.h"

#include "core/error.h"

using nlohmann::json;

namespace megaton::checkpoint {

json model_config_json(const cli::ModelArgs& m, int64_t vocab_size) {
  const int heads = m.num_attention_heads;
  return {{"num_layers", m.num_layers},
          {"hidden_size", m.hidden_size},
          {"num_attention_heads", heads},
          {"kv_channels", m.kv_channels > 0 ? m.kv_channels : (heads > 0 ? m.hidden_size / heads : 0)},
          {"ffn_hidden_size", m.ffn_hidden_size > 0 ? m.ffn_hidden_size : 4 * m.hidden_size},
          {"max_position_embeddings", m.max_position_embeddings},
          {"position_embedding_type", m.position_embedding_type},
          {"embed_layernorm", m.embed_layernorm},
          {"glu_activation", m.glu_activation},
          {"openai_gelu", m.openai_gelu},
          {"no_bias_gelu_fusion", m.no_bias_gelu_fusion},
          {"layernorm_epsilon", m.layernorm_epsilon},
          {"apply_residual_connection_post_layernorm", m.apply_residual_connection_post_layernorm},
          {"untie_embeddings_and_output_weights", m.untie_embeddings_and_output_weights},
          {"vocab_size", vocab_size}};
}

int64_t apply_model_config(const json& j, cli::ModelArgs& m) {
  auto get = [&](const char* key, auto& field) {
    if (!j.contains(key)) return;
    try {
      field = j.at(key).get<std::decay_t<decltype(field)>>();
    } catch (const json::exception& e) {
      throw CheckpointError(str("model_config '", key, "': ", j.at(key).dump(), " has the wrong type (", e.what(), ")"));
    }
  };
  get("num_layers", m.num_layers);
  get("hidden_size", m.hidden_size);
  get("num_attention_heads", m.num_attention_heads);
  get("kv_channels", m.kv_channels);
  get("ffn_hidden_size", m.ffn_hidden_size);
  get("max_position_embeddings", m.max_position_embeddings);
  get("position_embedding_type", m.position_embedding_type);
  get("embed_layernorm", m.embed_layernorm);
  get("glu_activation", m.glu_activation);
  get("openai_gelu", m.openai_gelu);
  get("no_bias_gelu_fusion", m.no_bias_gelu_fusion);
  get("layernorm_epsilon", m.layernorm_epsilon);
  get("apply_residual_connection_post_layernorm", m.apply_residual_connection_post_layernorm);
  get("untie_embeddings_and_output_weights", m.untie_embeddings_and_output_weights);
  int64_t vocab = 0;
  get("vocab_size", vocab);
  return vocab;
}

}  // namespace megaton::checkpoint
