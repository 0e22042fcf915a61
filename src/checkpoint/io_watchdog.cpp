#include "checkpoint/io_watchdog.h"

#include <mpi.h>

#include <chrono>
#include <cstdio>

#include "core/error.h"

namespace megaton::checkpoint {

IoWatchdog::IoWatchdog(double timeout_s, std::string what, const Logger& log, std::function<void()> cleanup)
    : timeout_s_(timeout_s), what_(std::move(what)), log_(log), cleanup_(std::move(cleanup)) {
  if (timeout_s_ > 0) thread_ = std::thread([this] { watch(); });
}

IoWatchdog::~IoWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void IoWatchdog::progress(const std::string& next) {
  std::lock_guard<std::mutex> lock(mu_);
  step_ = next;
  ++ticks_;
  cv_.notify_all();
}

void IoWatchdog::watch() {
  std::unique_lock<std::mutex> lock(mu_);
  const auto timeout = std::chrono::duration<double>(timeout_s_);
  while (!done_) {
    const long long seen = ticks_;
    if (cv_.wait_for(lock, timeout, [&] { return done_ || ticks_ != seen; })) continue;
    const std::string step = step_;
    lock.unlock();
    if (cleanup_) {
      try {
        cleanup_();
      } catch (const std::exception&) {
        // the abort below is what matters
      }
    }
    log_.error("megaton: checkpoint error: ", what_, ": no progress for ", timeout_s_, " s (at '", step,
               "'): a rank's write failed or stalls inside HDF5's collective I/O (a full disk or quota, a hung file "
               "system); nothing was published, the previous checkpoint stands; aborting all ranks with exit code ",
               static_cast<int>(ExitCode::kCheckpoint));
    MPI_Abort(MPI_COMM_WORLD, static_cast<int>(ExitCode::kCheckpoint));
    return;
  }
}

}  // namespace megaton::checkpoint
