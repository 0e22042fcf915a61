// SIGINT and SIGTERM held pending instead of killing the process: blocked in the calling thread before any other
// thread starts (MPI's, OpenMP's, the HTTP pool's inherit the mask), then polled by the server's loop. No handler and
// no process-wide flag; the previous mask comes back at destruction.
#pragma once
#include <csignal>

namespace megaton::serve {

class BlockedStopSignals {
 public:
  BlockedStopSignals();
  ~BlockedStopSignals();
  BlockedStopSignals(const BlockedStopSignals&) = delete;
  BlockedStopSignals& operator=(const BlockedStopSignals&) = delete;

  /// Whether SIGINT or SIGTERM is pending (it is consumed); never waits.
  bool received();

 private:
  sigset_t set_{}, old_{};
};

}  // namespace megaton::serve
