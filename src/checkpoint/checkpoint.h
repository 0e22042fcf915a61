// Saving and loading training state as universal checkpoints (docs/checkpoints.md, checkpoints-format/SPEC.md):
// every tensor at its global shape in one parallel-HDF5 file, written collectively by all ranks (each its hyperslab,
// one writer per replica), so a checkpoint saved at any TP x PP x DP loads at any other.
//
//   CheckpointState st{iteration, state_json, model_config_json, args_json};
//   save_checkpoint("/ckpt", st, params, &optim, &rng, groups, {.keep_last = 3}, log);      // collective
//   std::optional<LoadResult> r = load_checkpoint("/ckpt", params, &optim, &rng, groups, opts, log);
//
// Both are collective over MPI_COMM_WORLD (ProcessGroups must span the whole job). Errors are CheckpointError,
// thrown on every rank alike where they are detected collectively.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/log.h"
#include "core/timer.h"
#include "dist/process_groups.h"
#include "parallel/param_info.h"

namespace megaton::checkpoint {

/// Optimizer state in the ParamInfo layout: state name ("master", "exp_avg", "exp_avg_sq", ...) -> canonical param
/// name -> local shard with the same shape as that ParamInfo's `param` (dtype free: fp32 for Adam). The optimizer
/// converts to/from its own storage (flat ZeRO buffers) around save/load.
using OptimState = std::map<std::string, std::map<std::string, torch::Tensor>>;

/// This rank's random generator states: name ("cpu", "cuda", "tp_tracker", ...) -> 1-D uint8 tensor. Every rank
/// must pass the same names with the same byte lengths.
using RngState = std::map<std::string, torch::Tensor>;

/// What is saved beside the tensors. JSON objects are taken from global rank 0.
struct CheckpointState {
  int64_t iteration = 0;  // kReleaseIteration for a release checkpoint
  /// Training progress: consumed_train_samples, consumed_valid_samples, consumed_train_tokens, lr_scheduler {...},
  /// loss_scaler {...}, ... Free-form; returned as saved.
  nlohmann::json state = nlohmann::json::object();
  /// The architecture (num_layers, hidden_size, ...): compared with LoadOptions::expected_model_config at load.
  nlohmann::json model_config = nlohmann::json::object();
  /// Every flag of the saving run, for the record.
  nlohmann::json args = nlohmann::json::object();
};

struct SaveOptions {
  bool save_optim = true;     // false: --no-save-optim
  bool save_rng = true;       // false: --no-save-rng
  int keep_last = 0;          // > 0: keep only the newest K iter_ directories after publishing this one
  bool collective_io = true;  // H5FD_MPIO_COLLECTIVE (else independent) raw-data transfers
  std::string job_id;         // names the temporary directory; "" -> SLURM_JOB_ID or rank 0's pid
  /// --distributed-timeout-minutes: a save that completes no step for this long ends the job (io_watchdog.h);
  /// <= 0 waits forever.
  double io_timeout_s = 600;
  /// Refuse to save a state holding NaN or inf (training sets it: a diverged state never replaces a finite
  /// checkpoint). Otherwise such a checkpoint is saved, flagged (manifest "nonfinite" counts, file attribute
  /// nonfinite_values) and --keep-last removes nothing when publishing it.
  bool refuse_nonfinite = false;
  double progress_every_s = kProgressEverySeconds;  // rank 0 logs the save's progress (GB, rate, ETA) this often
};

struct LoadOptions {
  bool load_optim = true;  // false: --no-load-optim
  bool load_rng = true;    // false: --no-load-rng
  bool finetune = false;   // --finetune: weights only, iteration and progress reset
  bool verify_checksums = true;
  bool strict = true;  // every model tensor in the file must be used by the model
  bool collective_io = false;
  std::optional<int64_t> iteration;  // load this one instead of the tracker's
  /// Keys compared with the checkpoint's model_config; any difference is a CheckpointError naming the key.
  nlohmann::json expected_model_config = nlohmann::json::object();
  double progress_every_s = kProgressEverySeconds;  // rank 0 logs the load's progress (GB, rate, ETA) this often
  int64_t readahead_bytes =
      int64_t{1} << 30;  // how far a rank's disk reads may run ahead of it (checkpoint/readahead.h)
};

/// The layout a checkpoint was saved at (for information and RNG restore; tensors do not depend on it).
struct SavedLayout {
  int tp = 1, pp = 1, dp = 1, world = 1;
  bool operator==(const SavedLayout& o) const { return tp == o.tp && pp == o.pp && dp == o.dp && world == o.world; }
};

struct LoadResult {
  std::string path;  // the HDF5 file read
  int64_t saved_iteration = 0;
  int64_t iteration = 0;  // 0 under finetune, else saved_iteration
  CheckpointState meta;   // as saved (state is emptied under finetune)
  SavedLayout saved_layout;
  bool optim_loaded = false;
  bool rng_loaded = false;
};

/// Collective. Writes <save_dir>/iter_NNNNNNN/model_optim.h5 through a temporary directory and publishes it (rename,
/// tracker files) only after every rank succeeded. Returns the published directory.
/// `optim` / `rng` may be null (nothing of that kind is saved).
std::string save_checkpoint(const std::string& save_dir, const CheckpointState& state, const parallel::ParamList& model,
                            const OptimState* optim, const RngState* rng, const dist::ProcessGroups& groups,
                            const SaveOptions& opts, const Logger& log);

/// Collective. Fills the local shards of `model` (in place, under NoGradGuard), of `optim` (pre-allocated tensors are
/// filled in place; missing ones are allocated) and `rng`. Returns nullopt (after a warning) when `load_dir` has no
/// tracker file and no iteration was asked: a fresh start, as in Megatron.
std::optional<LoadResult> load_checkpoint(const std::string& load_dir, parallel::ParamList& model, OptimState* optim,
                                          RngState* rng, const dist::ProcessGroups& groups, const LoadOptions& opts,
                                          const Logger& log);

/// The file of iteration `it` under `dir`.
std::string checkpoint_file(const std::string& dir, int64_t iteration);

}  // namespace megaton::checkpoint
