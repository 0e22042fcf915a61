// Megatron-LM's --use-checkpoint-args, always on: `megaton generate --load CKPT` (and eval, and train --finetune) take
// the model's architecture, sequence length, tokenizer and precision from the checkpoint when the command line gives
// no architecture (no --num-layers). A flag given explicitly keeps its value; the load then checks it against the
// checkpoint as it checks any architecture, and refuses a mismatch naming both values.
#pragma once
#include <string>
#include <vector>

#include "train/train_config.h"

namespace megaton::cli {

/// Fills `flags` from the checkpoint flags.checkpoint.load when flags.model.num_layers is 0; returns what it took
/// ("--num-layers 24 --hidden-size 1024 ... from CKPT"), or "" when it took nothing. CheckpointError when the
/// checkpoint cannot be read.
std::string take_architecture_from_checkpoint(train::TrainConfig& flags);

}  // namespace megaton::cli
