// SIGTERM / SIGUSR1 (what SLURM sends before the time limit, --signal=USR1@90) turn into a request to save a
// checkpoint and exit cleanly. The handler only stores the signal number in a lock-free atomic (the one piece of
// process-wide state a signal handler needs); the training loop polls it once per iteration and agrees with the other
// ranks (all-reduce MAX) before acting, so every rank stops at the same iteration.
#pragma once
#include <csignal>

namespace megaton::train {

class StopSignals {
 public:
  /// Installs the handlers for SIGTERM and SIGUSR1 (the previous ones are restored by the destructor).
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  /// The last signal received (0: none).
  int received() const;
  /// Forgets a received signal (tests).
  void clear();

 private:
  struct sigaction old_term_ = {};
  struct sigaction old_usr1_ = {};
};

}  // namespace megaton::train
