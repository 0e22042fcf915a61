// The glue between the training loop and checkpoints: the model-config JSON compared at load, the record of the
// run's flags, and the conversions of optimizer / RNG state to the checkpoint's layouts.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/checkpoint.h"
#include "model/gpt_config.h"
#include "optim/optimizer.h"
#include "parallel/rng_tracker.h"
#include "train/train_config.h"

namespace megaton::train {

/// The flags of this run, for the record in the checkpoint.
nlohmann::json args_json(const TrainConfig& c);

/// optimizer state_dict (param -> state -> tensor) <-> checkpoint layout (state -> param -> tensor).
checkpoint::OptimState to_checkpoint_optim(const std::map<std::string, optim::ParamState>& by_param);
std::map<std::string, optim::ParamState> from_checkpoint_optim(const checkpoint::OptimState& by_state);

/// The model's dropout generators as checkpoint RNG state {"default", "tp_tracker"} (1-D uint8) and back.
checkpoint::RngState rng_to_checkpoint(const parallel::RngTracker& rng);
void rng_from_checkpoint(const checkpoint::RngState& s, parallel::RngTracker& rng);

}  // namespace megaton::train
