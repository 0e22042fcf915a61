// The learning-rate schedule's flags (Megatron's _add_learning_rate_args). Warm-up and decay are given in iterations,
// samples or tokens; scheduler() turns them into optim::AnnealingLR's sample counts for the run's length.
#pragma once
#include <cstdint>
#include <limits>
#include <string>

#include "optim/lr_scheduler.h"

namespace megaton::optim {

struct LrScheduleOptions {
  /// kLrNotGiven: not given (training requires it); a value nobody types, so that `--lr -1` is reported as negative.
  static constexpr double kLrNotGiven = -std::numeric_limits<double>::max();
  double lr = kLrNotGiven;
  double min_lr = 0.0;
  std::string lr_decay_style = "linear";  // constant | linear | cosine
  int64_t lr_decay_iters = 0;
  int64_t lr_decay_samples = 0;
  int64_t lr_decay_tokens = 0;
  double lr_warmup_fraction = -1.0;  // < 0: not given
  int64_t lr_warmup_iters = 0;
  int64_t lr_warmup_samples = 0;
  bool override_lr_scheduler = false;
  bool use_checkpoint_lr_scheduler = false;

  /// Megatron's rules: the iteration-based flags with --train-iters, the sample-based ones with --train-samples
  /// (`iteration_mode` / `sample_mode`), exclusive warm-up forms, 0 <= --min-lr <= --lr, a known decay style.
  void validate(bool iteration_mode, bool sample_mode) const;

  /// training.py::get_learning_rate_scheduler. Iteration mode (train_samples == 0): decay = (lr_decay_iters or
  /// train_iters) x global_batch; warm-up = fraction x decay or lr_warmup_iters x global_batch. Sample mode: decay =
  /// lr_decay_samples or train_samples; warm-up = fraction x decay or lr_warmup_samples. UsageError without --lr.
  LrSchedulerOptions scheduler(int64_t train_iters, int64_t train_samples, int64_t global_batch) const;
};

}  // namespace megaton::optim
