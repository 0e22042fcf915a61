// Offline conversion of a checkpoint (`megaton reshard`). Tensors are stored at global shapes, so a new TP x PP needs
// no re-slicing: reshard checks that the target layout divides the model (heads, layers, every TP-split dimension),
// converts the model weights' dtype, optionally drops the optimizer state, and records the target layout. With
// `release` it writes release/ (tracker "release"), Megatron's single-rank release checkpoint.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/log.h"

namespace megaton::checkpoint {

struct ReshardOptions {
  int target_tp = 1;
  int target_pp = 1;
  bool drop_optimizer = false;
  std::string dtype;  // "" keeps the stored dtype; "bf16"/"bfloat16", "fp16"/"float16", "fp32"/"float32"
  bool release = false;
  std::optional<int64_t> iteration;  // of --load; default: its tracker's
  int keep_last = 0;
};

/// Reads the checkpoint in `load` (a --save directory, an iter_ directory or a file), writes the converted one under
/// `save` and publishes it. Serial (no MPI). Returns the published directory. UsageError for a target layout that
/// does not divide the model; CheckpointError for a bad source.
std::string reshard_checkpoint(const std::string& load, const std::string& save, const ReshardOptions& opts,
                               const Logger& log);

/// Throws UsageError unless TP=tp, PP=pp fit `model_config` (num_attention_heads, num_layers, ffn_hidden_size) and
/// every TP-split tensor of the manifest (its partition_dim divides by tp). `where` prefixes messages.
void check_target_layout(const nlohmann::json& model_config, const nlohmann::json& manifest, int tp, int pp);

}  // namespace megaton::checkpoint
