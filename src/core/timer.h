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

/// A mark of the host's steady clock: the time between two is host wall time (what a CPU run's marks measure).
std::unique_ptr<DeviceMark> host_mark();
/// A mark of `clock`, or of the host's clock when `clock` is empty.
std::unique_ptr<DeviceMark> mark_now(const DeviceClock& clock);

using MarkSpan = std::pair<std::unique_ptr<DeviceMark>, std::unique_ptr<DeviceMark>>;  // (start, stop)

/// A timer's time taken out of it (Timer::take) to be read later: reading waits only for the device to pass the
/// spans it holds, not for the work queued after them.
class TimerReading {
 public:
  /// Seconds; waits for the device to pass the last span's stop mark.
  double seconds() const;

 private:
  friend class Timer;
  double total_ = 0.0;
  std::vector<MarkSpan> spans_;
};

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
  /// The time so far as a reading to resolve later, the timer reset (a running timer keeps running from here).
  TimerReading take();
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
  std::vector<MarkSpan> spans_;
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
  /// Every timer's take(): the interval's times, read later (TimerReading::seconds) without draining the device.
  std::map<std::string, TimerReading> take_all();

 private:
  std::map<std::string, Timer> timers_;
  DeviceClock clock_;
};

/// Progress of a long job: rate and ETA. `line(done)` formats "12.0% 1200/10000 docs, 5400 docs/s, ETA 0:00:16".
/// With a `scale`, amounts are shown divided by it with two decimals: Progress(bytes, "GB", 1e9) shows
/// "45.2% 8.31/18.40 GB, 0.65 GB/s, elapsed 0:00:12, ETA 0:00:15".
///
///   Progress p(total, "examples");
///   for (...) { if (p.due(10)) log.info0("eval: ", p.line(done)); ... }
class Progress {
 public:
  Progress(double total, std::string unit, double scale = 1.0);
  std::string line(double done) const;
  double seconds() const;
  /// True once every `every_s` seconds (first after `every_s`): when a long step reports. `every_s` <= 0: every call.
  bool due(double every_s);

 private:
  double total_;
  std::string unit_;
  double scale_;
  std::chrono::steady_clock::time_point start_;
  double last_due_ = 0.0;
};

/// How often long steps (checkpoint save and load, reshard, export, eval) report their progress, in seconds.
inline constexpr double kProgressEverySeconds = 10.0;

/// "1:02:03" from seconds.
std::string format_duration(double seconds);

}  // namespace megaton
