#include "core/timer.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace megaton {

namespace {

class HostMark : public DeviceMark {
 public:
  double seconds_since(const DeviceMark& earlier) const override {
    return std::chrono::duration<double>(t_ - dynamic_cast<const HostMark&>(earlier).t_).count();
  }

 private:
  std::chrono::steady_clock::time_point t_ = std::chrono::steady_clock::now();
};

}  // namespace

std::unique_ptr<DeviceMark> host_mark() {
  return std::make_unique<HostMark>();
}

std::unique_ptr<DeviceMark> mark_now(const DeviceClock& clock) {
  return clock ? clock() : host_mark();
}

double TimerReading::seconds() const {
  double t = total_;
  for (const auto& [start, stop] : spans_) t += stop->seconds_since(*start);
  return t;
}

void Timer::start() {
  if (running_) return;
  running_ = true;
  if (clock_)
    start_mark_ = clock_();
  else
    started_ = Clock::now();
}

void Timer::stop() {
  if (!running_) return;
  running_ = false;
  if (!clock_) {
    total_ += std::chrono::duration<double>(Clock::now() - started_).count();
    return;
  }
  spans_.emplace_back(std::move(start_mark_), clock_());
  constexpr size_t kMaxSpans = 256;
  if (spans_.size() > kMaxSpans) fold_spans(kMaxSpans / 2);
}

void Timer::fold_spans(size_t keep) {
  const size_t n = spans_.size() > keep ? spans_.size() - keep : 0;
  for (size_t i = 0; i < n; ++i) total_ += spans_[i].second->seconds_since(*spans_[i].first);
  spans_.erase(spans_.begin(), spans_.begin() + static_cast<std::ptrdiff_t>(n));
}

double Timer::elapsed(bool reset) {
  const bool was_running = running_;
  if (was_running) stop();
  fold_spans(0);
  const double t = total_;
  if (reset) total_ = 0.0;
  if (was_running) start();
  return t;
}

TimerReading Timer::take() {
  const bool was_running = running_;
  if (was_running) stop();
  TimerReading r;
  r.total_ = total_;
  r.spans_ = std::move(spans_);
  spans_.clear();
  total_ = 0.0;
  if (was_running) start();
  return r;
}

Timer& Timers::operator()(const std::string& name) {
  auto [it, inserted] = timers_.try_emplace(name);
  if (inserted) it->second.set_device_clock(clock_);
  return it->second;
}

void Timers::set_device_clock(DeviceClock clock) {
  clock_ = std::move(clock);
  for (auto& [name, timer] : timers_) timer.set_device_clock(clock_);
}

std::string Timers::report(double normalizer) {
  std::ostringstream os;
  bool first = true;
  for (auto& [name, timer] : timers_) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.2f", timer.elapsed(true) * 1000.0 / normalizer);
    os << (first ? "" : " | ") << name << ": " << buf;
    first = false;
  }
  return os.str();
}

std::map<std::string, double> Timers::elapsed_all(bool reset) {
  std::map<std::string, double> out;
  for (auto& [name, timer] : timers_) out[name] = timer.elapsed(reset);
  return out;
}

std::map<std::string, TimerReading> Timers::take_all() {
  std::map<std::string, TimerReading> out;
  for (auto& [name, timer] : timers_) out.emplace(name, timer.take());
  return out;
}

Progress::Progress(double total, std::string unit, double scale)
    : total_(total),
      unit_(std::move(unit)),
      scale_(scale > 0 ? scale : 1.0),
      start_(std::chrono::steady_clock::now()) {}

double Progress::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

bool Progress::due(double every_s) {
  const double now = seconds();
  if (now - last_due_ < every_s) return false;
  last_due_ = now;
  return true;
}

std::string Progress::line(double done) const {
  const double s = seconds();
  const double rate = s > 0 ? done / s : 0.0;
  const int decimals = scale_ == 1.0 ? 0 : 2;
  const double d = done / scale_, t = total_ / scale_, r = rate / scale_;
  char buf[256];
  if (total_ > 0) {
    const double eta = rate > 0 ? (total_ - done) / rate : 0.0;
    std::snprintf(buf, sizeof(buf), "%5.1f%% %.*f/%.*f %s, %.*f %s/s, elapsed %s, ETA %s", 100.0 * done / total_,
                  decimals, d, decimals, t, unit_.c_str(), scale_ == 1.0 ? 1 : 2, r, unit_.c_str(),
                  format_duration(s).c_str(), format_duration(eta).c_str());
  } else {
    std::snprintf(buf, sizeof(buf), "%.*f %s, %.*f %s/s, elapsed %s", decimals, d, unit_.c_str(), scale_ == 1.0 ? 1 : 2,
                  r, unit_.c_str(), format_duration(s).c_str());
  }
  return buf;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  return buf;
}

}  // namespace megaton
