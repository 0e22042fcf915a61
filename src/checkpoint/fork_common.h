// Pieces shared by the readers of Megatron-DeepSpeed's checkpoints (deepspeed_reader.cpp, megatron_reader.cpp).
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/deepspeed_layout.h"
#include "checkpoint/fork_checkpoint.h"
#include "checkpoint/py_value.h"

namespace megaton::checkpoint::fork {

/// The first line of a tracker file, trailing blanks removed.
std::string first_line(const std::filesystem::path& p);
bool all_digits(const std::string& s);
/// An int, a float or a one-element tensor (an optimizer's step) as an integer.
int64_t int_of(const Py& v, const std::string& where);

/// What every model-state file of the fork holds beside the tensors: args, iteration, tokens, checkpoint_info,
/// lr_scheduler.
struct Meta {
  Py root;
  nlohmann::json args;
  CheckpointState meta;
  int64_t padded_vocab = 0, vocab = 0;
};
Meta read_meta(const std::string& file);

/// DeepSpeed's saved `skipped_steps`, 0 where absent (Megatron's format has none).
int64_t skipped_steps(const Meta& mm, const std::string& where);
/// The optimizer's scalar state (MixedPrecisionOptimizer::scalar_state's keys): the args' optimizer, the Adam
/// `step`, `skipped` steps and the grad scaler's state (null: none).
nlohmann::json optimizer_state(const Meta& mm, int64_t step, int64_t skipped, const nlohmann::json& scaler);

/// <dir>/mp_rank_MM_model_states.pt
std::string mp_file(const std::string& dir, int m);

/// The readers of each layout: fill `out` (its meta and padded_vocab are set) from `fc`.
void read_deepspeed(const ForeignCheckpoint& fc, const Meta& mm, ForeignState& out, const Logger& log);
void read_universal(const ForeignCheckpoint& fc, const Meta& mm, ForeignState& out, const Logger& log);
void read_megatron(const ForeignCheckpoint& fc, const Meta& mm, ForeignState& out, const Logger& log);

/// Slices of one parameter (one per TP rank, the fork's local shapes) -> the canonical tensor. TP-replicated ones
/// are averaged over the copies, as DeepSpeed's universal conversion does.
torch::Tensor merge_slices(const DsParam& p, const std::vector<torch::Tensor>& slices, const std::string& where);

}  // namespace megaton::checkpoint::fork
