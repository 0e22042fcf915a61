// Named wall-clock timers (Megatron's `timers('forward-compute')`), and a progress meter for long jobs.
#pragma once
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace megaton {

/// A point on a device's timeline (a CUDA event). Timers with a device clock time a phase between two marks, so start
/// and stop never wait for the device; only reading the time waits, for the phase's last mark.
class DeviceMark {
 public:
  virtual ~DeviceMark() = default;
  /// Seconds of device time from `earlier` to this mark; waits until the device has passed this mark.
  virtual double seconds_since(const DeviceMark& earlier) const = 0;
};

/// Makes a mark at the device's current position (the end of the work queued so far).
using DeviceClock = std::function<std::unique_ptr<DeviceMark>()>;

/// One stopwatch: start/stop accumulate; elapsed() reads (and optionally resets) the total in seconds. Without a device
/// clock it measures host wall-clock time. With one (Timers::set_device_clock: CUDA events on the compute stream), it
/// measures the device time between the marks made at start and stop: what the phase cost the GPU, measured without
/// the torch.cuda.synchronize() of Megatron's timers, which drained the GPU six times per iteration.
class Timer {
 public:
  void set_device_clock(DeviceClock clock) { clock_ = std::move(clock); }
  void start();
  void stop();
  double elapsed(bool reset = true);
  bool running() const { return running_; }

 private:
  using Clock = std::chrono::steady_clock;
  /// Folds the oldest device spans into total_ (they are long done) so a long log interval keeps few events alive.
  void fold_spans(size_t keep);

  DeviceClock clock_;
  bool running_ = false;
  double total_ = 0.0;
  Clock::time_point started_;
  std::unique_ptr<DeviceMark> start_mark_;
  std::vector<std::pair<std::unique_ptr<DeviceMark>, std::unique_ptr<DeviceMark>>> spans_;  // (start, stop) marks
};

/// A set of named timers. `timers("forward").start()`.
class Timers {
 public:
  Timer& operator()(const std::string& name);
  /// Every timer, existing and future, times with `clock` (see Timer).
  void set_device_clock(DeviceClock clock);
  /// "forward: 12.3 | backward: 20.1" in milliseconds averaged over `normalizer`, resetting the timers.
  std::string report(double normalizer = 1.0);
  std::map<std::string, double> elapsed_all(bool reset = true);

 private:
  std::map<std::string, Timer> timers_;
  DeviceClock clock_;
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
