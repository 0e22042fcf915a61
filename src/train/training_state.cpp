#include "train/training_state.h"

#include "core/error.h"

namespace megaton::train {

nlohmann::json args_json(const TrainConfig& c) {
  const auto& p = c.parallel;
  const auto& t = c.loop;
  const auto& lr = c.lr;
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
          {"make_vocab_size_divisible_by", c.model.make_vocab_size_divisible_by},
          {"pad_vocab_size_to", c.model.pad_vocab_size_to},
          {"seed", t.seed},
          {"optimizer", c.optimizer.kind},
          {"lr", lr.lr},
          {"min_lr", lr.min_lr},
          {"lr_decay_style", lr.lr_decay_style},
          {"weight_decay", c.optimizer.weight_decay},
          {"clip_grad", c.optimizer.clip_grad},
          {"fp16", c.precision.fp16},
          {"bf16", c.precision.bf16},
          {"data_path", c.data.data_path},
          {"split", c.data.split},
          {"train_weighted_split_paths", c.data.train_weighted_split_paths},
          {"valid_weighted_split_paths", c.data.valid_weighted_split_paths},
          {"tokenizer_type", c.tokenizer.tokenizer_type},
          {"vocab_file", c.tokenizer.vocab_file},
          {"merge_file", c.tokenizer.merge_file},
          {"tokenizer_name_or_path", c.tokenizer.tokenizer_name_or_path}};
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
