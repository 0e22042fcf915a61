#include "train/logging_options.h"

#include "core/error.h"

namespace megaton::train {

void LoggingOptions::validate() {
  LoggingOptions& l = *this;
  if (l.profile) {
    MEGATON_CHECK(l.profile_step_start >= 0 && l.profile_step_end > l.profile_step_start, UsageError,
                  "--profile-step-start (", l.profile_step_start, ") and --profile-step-end (", l.profile_step_end,
                  ") must satisfy 0 <= start < end");
    MEGATON_CHECK(!l.profile_ranks.empty(), UsageError, "--profile-ranks: expected at least one rank");
    for (const int64_t r : l.profile_ranks)
      MEGATON_CHECK(r >= 0, UsageError, "--profile-ranks: expected ranks >= 0, got ", r);
    if (l.profile_dir.empty()) l.profile_dir = l.tensorboard_dir;
    MEGATON_CHECK(!l.profile_dir.empty(), UsageError,
                  "--profile needs --profile-dir DIR (or --tensorboard-dir) for its trace and summary");
  }
  MEGATON_CHECK(l.tensorboard_queue_size > 0, UsageError, "--tensorboard-queue-size must be > 0 (got ",
                l.tensorboard_queue_size, ")");
  MEGATON_CHECK(l.tensorboard_log_interval > 0, UsageError, "--tensorboard-log-interval must be > 0 (got ",
                l.tensorboard_log_interval, ")");
}

}  // namespace megaton::train
