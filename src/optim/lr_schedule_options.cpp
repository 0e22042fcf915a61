#include "optim/lr_schedule_options.h"

#include <cmath>

#include "core/error.h"

namespace megaton::optim {

void LrScheduleOptions::validate(bool iteration_mode, bool sample_mode) const {
  if (iteration_mode) {
    MEGATON_CHECK(lr_decay_samples == 0, UsageError, "--lr-decay-samples goes with --train-samples, not --train-iters");
    MEGATON_CHECK(lr_warmup_samples == 0, UsageError,
                  "--lr-warmup-samples goes with --train-samples, not --train-iters");
    MEGATON_CHECK(!(lr_warmup_fraction >= 0 && lr_warmup_iters > 0), UsageError,
                  "--lr-warmup-fraction and --lr-warmup-iters are exclusive");
  }
  if (sample_mode) {
    MEGATON_CHECK(lr_decay_iters == 0, UsageError, "--lr-decay-iters goes with --train-iters, not --train-samples");
    MEGATON_CHECK(lr_warmup_iters == 0, UsageError, "--lr-warmup-iters goes with --train-iters, not --train-samples");
    MEGATON_CHECK(!(lr_warmup_fraction >= 0 && lr_warmup_samples > 0), UsageError,
                  "--lr-warmup-fraction and --lr-warmup-samples are exclusive");
  }
  // kLrNotGiven is the default; any other value must be a real learning rate.
  MEGATON_CHECK(lr == kLrNotGiven || (std::isfinite(lr) && lr >= 0), UsageError,
                "--lr must be a finite number >= 0, got ", lr);
  MEGATON_CHECK(std::isfinite(min_lr) && min_lr >= 0, UsageError, "--min-lr must be a finite number >= 0, got ",
                min_lr);
  if (lr >= 0) {
    MEGATON_CHECK(min_lr >= 0 && min_lr <= lr, UsageError, "--min-lr (", min_lr, ") must be in [0, --lr (", lr, ")]");
  }
  MEGATON_CHECK(lr_decay_style == "constant" || lr_decay_style == "linear" || lr_decay_style == "cosine", UsageError,
                "--lr-decay-style: expected constant|linear|cosine, got '", lr_decay_style, "'");
  MEGATON_CHECK(lr_warmup_fraction < 0 || lr_warmup_fraction <= 1, UsageError,
                "--lr-warmup-fraction must be in [0, 1], got ", lr_warmup_fraction);
}

LrSchedulerOptions LrScheduleOptions::scheduler(int64_t train_iters, int64_t train_samples,
                                                int64_t global_batch) const {
  LrSchedulerOptions o;
  MEGATON_CHECK(lr >= 0, UsageError, "--lr is required for training");
  o.max_lr = lr;
  o.min_lr = min_lr;
  o.decay_style = lr_decay_style;
  if (lr_decay_tokens > 0) o.decay_tokens = lr_decay_tokens;
  o.override_lr_scheduler = override_lr_scheduler;
  o.use_checkpoint_lr_scheduler = use_checkpoint_lr_scheduler;
  if (train_samples > 0) {
    o.decay_steps = lr_decay_samples > 0 ? lr_decay_samples : train_samples;
    o.warmup_steps = lr_warmup_fraction >= 0 ? lr_warmup_fraction * static_cast<double>(o.decay_steps)
                                             : static_cast<double>(lr_warmup_samples);
  } else {
    const int64_t iters = lr_decay_iters > 0 ? lr_decay_iters : train_iters;
    o.decay_steps = iters * global_batch;
    o.warmup_steps = lr_warmup_fraction >= 0 ? lr_warmup_fraction * static_cast<double>(o.decay_steps)
                                             : static_cast<double>(lr_warmup_iters) * static_cast<double>(global_batch);
  }
  return o;
}

}  // namespace megaton::optim
