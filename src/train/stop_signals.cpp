#include "train/stop_signals.h"

#include <atomic>

#include "core/error.h"

namespace megaton::train {

namespace {
// Written only by the handler, read by the loop. Signal handlers cannot carry context, so this is file-local.
std::atomic<int> g_received{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal flag must be lock-free");

extern "C" void on_stop_signal(int sig) {
  g_received.store(sig, std::memory_order_relaxed);
}
}  // namespace

StopSignals::StopSignals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  MEGATON_CHECK(sigaction(SIGTERM, &sa, &old_term_) == 0 && sigaction(SIGUSR1, &sa, &old_usr1_) == 0, RuntimeError,
                "cannot install the SIGTERM/SIGUSR1 handlers");
  g_received.store(0);
}

StopSignals::~StopSignals() {
  sigaction(SIGTERM, &old_term_, nullptr);
  sigaction(SIGUSR1, &old_usr1_, nullptr);
}

int StopSignals::received() const {
  return g_received.load(std::memory_order_relaxed);
}
void StopSignals::clear() {
  g_received.store(0);
}

}  // namespace megaton::train
