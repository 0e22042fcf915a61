#include "train/training_state.h"

#include "core/error.h"
#include "ops/activations.h"

namespace megaton::train {

nlohmann::json model_config_json(const model::GptConfig& c) {
  const auto& m = c.model;
  return {{"num_layers", m.num_layers},
          {"hidden_size", m.hidden_size},
          {"ffn_hidden_size", m.ffn_hidden_size},
          {"num_attention_heads", m.num_attention_heads},
          {"kv_channels", m.kv_channels},
          {"max_position_embeddings", m.max_position_embeddings},
          {"vocab_size", c.vocab_size},
          {"position_embedding_type", m.position_embedding_type},
          {"embed_layernorm", m.embed_layernorm},
          {"glu_activation", m.glu_activation},
          {"openai_gelu", m.openai_gelu},
          // Megatron's unfused bias-GELU is the exact (erf) GELU: true only where that is the activation, so a GLU
          // or --openai-gelu run loads whichever way the flag is given. The HF export reads it (gelu vs gelu_new).
          {"no_bias_gelu_fusion", c.activation() == ops::Activation::kGeluErf},
          {"apply_residual_connection_post_layernorm", m.apply_residual_connection_post_layernorm},
          {"layernorm_epsilon", m.layernorm_epsilon},
          {"untie_embeddings_and_output_weights", m.untie_embeddings_and_output_weights}};
}

nlohmann::json args_json(const TrainConfig& c) {
  const auto& p = c.parallel;
  const auto& t = c.training;
  return {{"tensor_model_parallel_size", p.tensor_model_parallel_size},
          {"pipeline_model_parallel_size", p.pipeline_model_parallel_size},
          {"data_parallel_size", p.data_parallel_size},
          {"world_size", p.world_size},
          {"zero_stage", p.zero_stage},
          {"micro_batch_size", t.micro_batch_size},
          {"global_batch_size", t.global_batch_size},
          {"rampup_batch_size", t.rampup_batch_size},
          {"train_iters", t.train_iters},
          {"train_samples", t.train_samples},
          {"seq_length", c.model.seq_length},
          {"seed", t.seed},
          {"optimizer", t.optimizer},
          {"lr", t.lr},
          {"min_lr", t.min_lr},
          {"lr_decay_style", t.lr_decay_style},
          {"weight_decay", t.weight_decay},
          {"clip_grad", t.clip_grad},
          {"fp16", c.precision.fp16},
          {"bf16", c.precision.bf16},
          {"data_path", c.data.data_path},
          {"split", c.data.split},
          {"train_weighted_split_paths", c.data.train_weighted_split_paths},
          {"valid_weighted_split_paths", c.data.valid_weighted_split_paths},
          {"tokenizer_type", c.data.tokenizer_type},
          {"vocab_file", c.data.vocab_file},
          {"merge_file", c.data.merge_file},
          {"tokenizer_name_or_path", c.data.tokenizer_name_or_path}};
}

checkpoint::OptimState to_checkpoint_optim(const std::map<std::string, optim::ParamState>& by_param) {
  checkpoint::OptimState out;
  for (const auto& [param, states] : by_param)
    for (const auto& [state, t] : states) out[state][param] = t;
  return out;
}

std::map<std::string, optim::ParamState> from_checkpoint_optim(const checkpoint::OptimState& by_state) {
  std::map<std::string, optim::ParamState> out;
  for (const auto& [state, params] : by_state)
    for (const auto& [param, t] : params) out[param][state] = t;
  return out;
}

checkpoint::RngState rng_to_checkpoint(const parallel::RngTracker& rng) {
  const parallel::RngState s = rng.get_state();
  return {{"default", s.default_state.to(torch::kCPU).contiguous().view(-1)},
          {"tp_tracker", s.tp_state.to(torch::kCPU).contiguous().view(-1)}};
}

void rng_from_checkpoint(const checkpoint::RngState& s, parallel::RngTracker& rng) {
  auto get = [&](const char* name) {
    auto it = s.find(name);
    MEGATON_CHECK(it != s.end() && it->second.defined(), CheckpointError, "checkpoint RNG state lacks '", name, "'");
    return it->second.to(torch::kUInt8).contiguous();
  };
  rng.set_state({get("default"), get("tp_tracker")});
}

}  // namespace megaton::train
