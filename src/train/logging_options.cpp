#include "train/logging_options.h"

#include "core/error.h"
#include "core/log.h"

namespace megaton::train {

const std::string& LoggingOptions::level_for_rank(int rank) const {
  return rank == 0 || log_level_replica.empty() ? log_level : log_level_replica;
}

void LoggingOptions::validate() {
  LoggingOptions& l = *this;
  parse_log_level(l.log_level);  // UsageError for an unknown name
  if (!l.log_level_replica.empty()) parse_log_level(l.log_level_replica);
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
