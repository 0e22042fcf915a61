// A watchdog over a checkpoint's collective I/O. megaton agrees on every failure it sees (collective.h), but a rank
// whose write fails inside one of HDF5's own collectives (its metadata flush at a sync point) can leave the other
// ranks waiting inside HDF5, beyond the reach of any agreement. When no step of the save completes for the timeout
// (--distributed-timeout-minutes), the watchdog runs its cleanup (rank 0 removes the temporary directory), prints a
// checkpoint error naming the last step and ends the whole job with exit code 4, as a failed collective would.
//
//   IoWatchdog dog(600, log, [&] { remove_tree(tmp_dir); });
//   dog.progress("model/embedding.weight");   // after each completed step
#pragma once
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "core/log.h"

namespace megaton::checkpoint {

class IoWatchdog {
 public:
  /// timeout_s <= 0: no watchdog. `cleanup` runs on the watchdog's thread just before the job is aborted.
  IoWatchdog(double timeout_s, std::string what, const Logger& log, std::function<void()> cleanup);
  ~IoWatchdog();
  IoWatchdog(const IoWatchdog&) = delete;
  IoWatchdog& operator=(const IoWatchdog&) = delete;

  /// A step completed: the clock starts again; `next` names the step now under way (for the message).
  void progress(const std::string& next);

 private:
  void watch();

  double timeout_s_;
  std::string what_;
  const Logger& log_;
  std::function<void()> cleanup_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string step_ = "start";
  long long ticks_ = 0;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace megaton::checkpoint
