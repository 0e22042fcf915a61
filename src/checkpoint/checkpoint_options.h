// Where a training run saves and loads its checkpoints, how often, and what they hold (Megatron's
// _add_checkpointing_args; --keep-last is megaton's).
#pragma once
#include <cstdint>
#include <string>

namespace megaton::checkpoint {

struct CheckpointOptions {
  std::string save;
  std::string load;
  int64_t save_interval = 0;
  bool save_optim = true;       // --no-save-optim clears
  bool save_rng = true;         // --no-save-rng clears
  bool load_optim = true;       // --no-load-optim clears
  bool load_rng = true;         // --no-load-rng clears
  bool finetune = false;        // load weights only and start at iteration 0
  bool reset_progress = false;  // --reset-progress: load as usual, then start at iteration 0, no samples consumed
  int keep_last = 0;            // 0: keep every checkpoint
  bool async_save = false;      // --async-save: copy the state to host memory, write it on a thread of its own

  /// UsageError: --save without --save-interval > 0, a negative --keep-last.
  void validate() const;
};

}  // namespace megaton::checkpoint
