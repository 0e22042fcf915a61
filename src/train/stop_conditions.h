// When a training run stops early, and why (Megatron's exit triggers): --exit-interval, --exit-duration-in-mins
// (counted from the start of the job's earliest process, as the fork counts it: starting hundreds of ranks takes
// minutes), --kill-switch-path appearing, or SIGTERM / SIGUSR1. Ranks agree on stopping through an all-reduce MAX over
// the host communicator every iteration, so they all stop at the same iteration. A signal means the job was interrupted
// (time limit, preemption): the run's exit code says so; the other triggers are asked-for ends of training.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "dist/process_groups.h"
#include "train/loop_options.h"
#include "train/stop_signals.h"

namespace megaton::train {

/// Reasons to stop, agreed with an all-reduce MAX (the largest wins).
enum class StopReason { kNone = 0, kExitInterval = 1, kDuration = 2, kKillSwitch = 3, kSignal = 4 };

/// "--exit-interval reached", ..., "done" for kNone.
const char* stop_reason_name(StopReason r);

class StopConditions {
 public:
  /// Installs the SIGTERM / SIGUSR1 handlers for the run's lifetime; agrees on the job's start time (the earliest
  /// process start over all ranks; collective over the host communicator).
  StopConditions(const LoopOptions& loop, const dist::ProcessGroups& groups);

  /// After `iteration` iterations: the reason every rank agrees on (collective over the host communicator; nothing
  /// waits for the device).
  StopReason agree(int64_t iteration);

  /// Whether the kill switch file exists on any rank, agreed before anything is loaded: the fork exits at once then.
  bool kill_switch_at_start();

  /// Minutes since the job's earliest process started.
  double minutes_since_start() const;

 private:
  bool kill_switch_present() const;  // on this rank's file system

  const LoopOptions& loop_;
  const dist::ProcessGroups& groups_;
  std::unique_ptr<StopSignals> signals_;
  double start_seconds_ = 0;  // system clock, seconds since the epoch
};

}  // namespace megaton::train
