#include "serve/blocked_signals.h"

#include <pthread.h>

#include <ctime>

namespace megaton::serve {

BlockedStopSignals::BlockedStopSignals() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set_, &old_);
}

BlockedStopSignals::~BlockedStopSignals() {
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

bool BlockedStopSignals::received() {
  const timespec zero{0, 0};
  return sigtimedwait(&set_, nullptr, &zero) > 0;
}

}  // namespace megaton::serve
