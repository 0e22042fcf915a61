// Reading the checkpoints Megatron-DeepSpeed writes (docs/checkpoints.md, "Megatron-DeepSpeed checkpoints"):
//   DeepSpeed pipeline   DIR/latest ("global_stepN"), DIR/global_stepN/ with layer_XX-model_TT-model_states.pt (the
//                        weights, per pipeline layer and TP rank), mp_rank_MM_model_states.pt (args, iteration, LR
//                        scheduler, the flat groups' parameter shapes; MM = pipeline stage x TP + TP rank) and
//                        [bf16_]zero_pp_rank_D_mp_rank_MM_optim_states.pt (ZeRO-1 fp32 partitions and Adam moments
//                        of data-parallel rank D, from the BF16 optimizer or the ZeRO stage 1/2 optimizer).
//   DeepSpeed universal  DIR/latest_universal naming a folder (or the folder itself) with zero/<param>/{fp32,exp_avg,
//                        exp_avg_sq}.pt, each {'param': the whole tensor, 'cat_dim': ...}, and the mp_rank files.
// The state comes back at megaton's canonical names and global shapes (deepspeed_layout.h).
#pragma once
#include <torch/torch.h>

#include <map>
#include <optional>
#include <string>

#include "checkpoint/checkpoint.h"

namespace megaton::checkpoint {

enum class ForeignFormat { kDeepSpeed, kDeepSpeedUniversal, kMegatron };

struct ForeignCheckpoint {
  ForeignFormat format;
  std::string root;          // what the user gave
  std::string dir;           // the step folder: global_stepN/, the universal folder, iter_NNNNNNN/
  std::string what() const;  // "DeepSpeed checkpoint DIR"
};

/// A Megatron-DeepSpeed checkpoint at `load` (its --save directory, or a step folder), or nullopt when `load` holds
/// a megaton checkpoint or nothing recognisable.
std::optional<ForeignCheckpoint> detect_foreign_checkpoint(const std::string& load);

/// What a foreign checkpoint holds, at megaton's canonical names and global shapes.
struct ForeignState {
  CheckpointState meta;      // iteration, state (progress, lr_scheduler, optimizer), model_config, args
  SavedLayout layout;        // TP x PP x DP it was saved at
  int64_t padded_vocab = 0;  // rows of the word embedding
  torch::ScalarType dtype = torch::kFloat32;                          // of the model weights (--bf16 / --fp16 / fp32)
  std::map<std::string, torch::Tensor> model;                         // canonical name -> tensor
  std::map<std::string, std::map<std::string, torch::Tensor>> optim;  // master / exp_avg / exp_avg_sq -> name -> fp32
};

/// Only the metadata (mp_rank_00's args): cheap, for taking the architecture before a job starts.
CheckpointState read_foreign_meta(const ForeignCheckpoint& fc);

/// The whole state. CheckpointError naming the file for anything missing, inconsistent or unreadable.
ForeignState read_foreign_checkpoint(const ForeignCheckpoint& fc, const Logger& log);

}  // namespace megaton::checkpoint
