// The training loop's settings (Megatron's _add_training_args): batch sizes and their ramp-up, how long to train,
// when to log, evaluate and stop, and the seed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "parallel/parallel_options.h"

namespace megaton::train {

struct LoopOptions {
  int micro_batch_size = 0;
  int global_batch_size = 0;               // 0 -> micro x DP (validate)
  std::vector<int64_t> rampup_batch_size;  // START INCR SAMPLES
  int64_t train_iters = 0;
  int64_t train_samples = 0;
  int64_t train_tokens = 0;  // also stop once this many tokens are consumed (0: no token budget)
  int log_interval = 100;
  int64_t exit_interval = 0;
  double exit_duration_in_mins = 0;  // Megatron takes an int; fractions are accepted too
  std::string kill_switch_path;
  std::vector<std::string> skip_train_iteration_range;  // "A-B" each
  int64_t max_nan_iterations = 10;  // without a grad scaler: stop after this many skipped non-finite updates in a row
  int64_t eval_interval = 1000;
  int64_t eval_iters = 100;
  bool eval_only = false;
  int64_t seed = 1234;
  bool dry_run = false;  // print the layout, memory and FLOPs, then exit
  // Derived by validate():
  int num_micro_batches = 1;  // at the full global batch

  /// Megatron's rules for the batch sizes against the layout (global batch a multiple of micro x DP; the ramp-up's
  /// START and INCR too; the interleaved schedule's micro-batches a multiple of PP), iterations against samples,
  /// intervals > 0. Fills global_batch_size and num_micro_batches. Idempotent.
  void validate(const parallel::ParallelOptions& parallel);
};

}  // namespace megaton::train
