// Named wall-clock timers (Megatron's `timers('forward-compute')`), and a progress meter for long jobs.
#pragma once
#include <chrono>
#include <functional>
#include <map>
#include <string>

namespace megaton {

/// One stopwatch: start/stop accumulate; elapsed() reads (and optionally resets) the total in seconds. With a sync
/// function (Timers::set_sync: the GPU's synchronize), start and stop first wait for queued device work, as
/// Megatron's timers call torch.cuda.synchronize(), so a phase's time is its device time, not its launch time.
class Timer {
 public:
  void set_sync(std::function<void()> sync) { sync_ = std::move(sync); }
  void start();
  void stop();
  double elapsed(bool reset = true);
  bool running() const { return running_; }

 private:
  using Clock = std::chrono::steady_clock;
  std::function<void()> sync_;
  bool running_ = false;
  double total_ = 0.0;
  Clock::time_point started_;
};

/// A set of named timers. `timers("forward").start()`.
class Timers {
 public:
  Timer& operator()(const std::string& name);
  /// Every timer, existing and future, synchronises with `sync` at start and stop.
  void set_sync(std::function<void()> sync);
  /// "forward: 12.3 | backward: 20.1" in milliseconds averaged over `normalizer`, resetting the timers.
  std::string report(double normalizer = 1.0);
  std::map<std::string, double> elapsed_all(bool reset = true);

 private:
  std::map<std::string, Timer> timers_;
  std::function<void()> sync_;
};

/// Progress of a long job: rate and ETA. `line(done)` formats "12.0% 1200/10000 docs, 5400 docs/s, ETA 0:00:16".
class Progress {
 public:
  Progress(double total, std::string unit);
  std::string line(double done) const;
  double seconds() const;

 private:
  double total_;
  std::string unit_;
  std::chrono::steady_clock::time_point start_;
};

/// "1:02:03" from seconds.
std::string format_duration(double seconds);

}  // namespace megaton
