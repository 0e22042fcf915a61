// `--profile`: the PyTorch (Kineto) profiler around chosen training iterations, as Megatron-LM's
// `--profile --use-pytorch-profiler --profile-step-start/--profile-step-end --profile-ranks`.
//
// Iterations profile_step_start+1 .. profile_step_end (1-based, i.e. the steps that run while the iteration counter
// goes from start to end, as Megatron-LM) are recorded on each rank listed in --profile-ranks. When recording stops
// the rank writes, into --profile-dir:
//   rank<R>.trace.json    the Chrome trace (chrome://tracing, Perfetto, TensorBoard's profile plugin), when the
//                         LibTorch build has Kineto (the PyTorch wheels do; Debian's CPU package does not)
//   rank<R>.summary.txt   a table of the ops/kernels by total time: one line per (device, name) with calls, total ms,
//                         ms per profiled step and share of that device's time; GPU kernels when CUDA is profiled
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "train/logging_options.h"

namespace megaton {

/// One row of the summary: all events with the same device and name.
struct ProfileRow {
  std::string device;  // "cpu" | "cuda"
  std::string name;
  int64_t calls = 0;
  double total_us = 0;
};

/// Rows sorted by device, then total time descending; formatted as rank<R>.summary.txt holds them.
std::string format_profile_summary(std::vector<ProfileRow> rows, int64_t steps);

class StepProfiler {
 public:
  /// `logging` after LoggingOptions::validate (profile_dir filled).
  StepProfiler(const train::LoggingOptions& logging, int rank, bool cuda);
  ~StepProfiler();
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  /// Call before running iteration `iteration` + 1 (the counter's value before the step).
  void before_step(int64_t iteration);
  /// Call after the counter was incremented to `iteration`. Returns the path of the summary when it was written.
  std::string after_step(int64_t iteration);

 private:
  int64_t start_, end_;
  std::string dir_;
  int rank_;
  bool cuda_;
  bool active_ = false;
  bool mine_ = false;
};

}  // namespace megaton
