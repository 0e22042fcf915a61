// What a training run reports besides its log lines (Megatron's _add_logging_args): TensorBoard, a JSON-lines metrics
// file, the log level, extra values on the log line, and LibTorch's profiler over a range of iterations.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace megaton::train {

struct LoggingOptions {
  std::string tensorboard_dir;
  int tensorboard_log_interval = 1;
  int tensorboard_queue_size = 1000;  // records buffered before the events file is flushed
  std::string metrics_file;           // JSONL of every logged iteration
  std::string log_level = "info";     // global rank 0's
  std::string log_level_replica;      // the other ranks'; "" = log_level
  std::string log_path;               // rank 0 also writes the resolved arguments to log_path/args_<time>.txt
  bool log_timers_to_tensorboard = false;
  bool log_validation_ppl_to_tensorboard = false;
  bool log_batch_size_to_tensorboard = false;
  bool log_loss_scale_to_tensorboard = true;     // --no-log-loss-scale-to-tensorboard clears
  bool log_learning_rate_to_tensorboard = true;  // --no-log-learnig-rate-to-tensorboard (Megatron's spelling) clears
  bool log_params_norm = false;                  // "params norm" of the fp32 masters on the log line
  // --profile: LibTorch's (Kineto) profiler over iterations profile_step_start+1 .. profile_step_end on these ranks.
  bool profile = false;
  int64_t profile_step_start = 10;
  int64_t profile_step_end = 12;
  std::vector<int64_t> profile_ranks{0};
  std::string profile_dir;  // default: tensorboard_dir (validate)

  /// UsageError naming the flag; fills profile_dir from tensorboard_dir.
  void validate();
  /// --log-level on global rank 0, --log-level-replica (else --log-level) on the others.
  const std::string& level_for_rank(int rank) const;
};

}  // namespace megaton::train
