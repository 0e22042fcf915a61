// A megaton checkpoint as a DeepSpeed universal checkpoint (`megaton convert --to ds-universal`), the way back to
// Megatron-DeepSpeed: the fork loads it with --universal-checkpoint at any TP x PP x DP.
//   SAVE/latest_universal                      "global_stepN_universal"
//   SAVE/global_stepN_universal/zero/<param>/  fp32.pt, exp_avg.pt, exp_avg_sq.pt ({'param': whole tensor,
//                                              'cat_dim': d for TP-split ones}), step.pt
//   SAVE/global_stepN_universal/mp_rank_MM_model_states.pt   args, iteration, tokens, lr_scheduler, param_shapes
//   SAVE/global_stepN_universal/layer_LL-model_TT-model_states.pt  the weights at the target TP
#pragma once
#include <string>
#include <vector>

#include "checkpoint/file.h"
#include "core/log.h"

namespace megaton::checkpoint {

struct UniversalOptions {
  int target_tp = 1;  // the layout of the mp_rank and layer files
  int target_pp = 1;
  std::vector<int> layers_per_stage;  // transformer layers of each target stage (DeepSpeed's partition)
};

/// Writes the universal folder (through a temporary name, renamed when complete) and then latest_universal.
/// Returns the folder. CheckpointError when the checkpoint has no optimizer state or a model GPTModelPipe lacks.
std::string write_ds_universal(const CheckpointFile& src, const std::string& save_root, const UniversalOptions& opts,
                               const Logger& log);

}  // namespace megaton::checkpoint
