#include "ops/gemm_tuner.h"

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <utility>

namespace megaton::ops {

void GemmTuner::set_enabled(bool on) {
  const std::lock_guard<std::mutex> lock(mu_);
  enabled_ = on;
}

bool GemmTuner::enabled() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return enabled_;
}

GemmTuner::Turn GemmTuner::next(const std::vector<int64_t>& key, int baseline, int last, const std::string& label) {
  const std::lock_guard<std::mutex> lock(mu_);
  if (auto it = chosen_.find(key); it != chosen_.end()) return {it->second, false, true};
  const int n = last - baseline;
  if (!enabled_ || n <= 1) return {baseline, false, true};
  auto [it, begun] = trials_.try_emplace(key);
  Trial& t = it->second;
  if (begun) {
    t.baseline = baseline, t.last = last, t.label = label;
    t.received.assign(size_t(n), 0);
    t.failed.assign(size_t(n), 0);
  }
  // Round r hands every candidate one turn, forwards for even r and backwards for odd r (a steady drift of the clock
  // then favours none); candidates that failed or have their samples are passed over.
  for (int tries = 0; tries < 2 * n; ++tries) {
    const int64_t j = t.turn++, round = j / n, i = j % n;
    const int c = round % 2 == 0 ? t.baseline + int(i) : t.last - 1 - int(i);
    const size_t k = size_t(c - t.baseline);
    if (t.failed[k] == 0 && t.received[k] < kSamples) return {c, true, false};
  }
  return {t.baseline, true, false};  // not reached while the trial is open (complete trials are decided)
}

void GemmTuner::add_sample(const std::vector<int64_t>& key, int c, std::unique_ptr<DeviceMark> start,
                           std::unique_ptr<DeviceMark> end) {
  const std::lock_guard<std::mutex> lock(mu_);
  auto it = trials_.find(key);
  if (it == trials_.end()) return;
  Trial& t = it->second;
  if (c < t.baseline || c >= t.last) return;
  t.samples.push_back({c, std::move(start), std::move(end)});
  ++t.received[size_t(c - t.baseline)];
  if (complete(t)) decide(key, t);
}

void GemmTuner::failed(const std::vector<int64_t>& key, int c) {
  const std::lock_guard<std::mutex> lock(mu_);
  auto it = trials_.find(key);
  if (it == trials_.end() || c < it->second.baseline || c >= it->second.last) return;
  it->second.failed[size_t(c - it->second.baseline)] = 1;
  if (complete(it->second)) decide(key, it->second);
}

bool GemmTuner::complete(const Trial& t) const {
  for (size_t k = 0; k < t.received.size(); ++k)
    if (t.failed[k] == 0 && t.received[k] < kSamples) return false;
  return true;
}

void GemmTuner::decide(const std::vector<int64_t>& key, Trial& t) {
  const int n = t.last - t.baseline;
  std::vector<std::vector<double>> times(static_cast<size_t>(n));  // seconds per call, per candidate
  for (const Sample& s : t.samples) times[size_t(s.candidate - t.baseline)].push_back(s.end->seconds_since(*s.start));
  std::vector<double> median(size_t(n), -1.0);  // < 0: failed (or never timed)
  for (int k = 0; k < n; ++k) {
    std::vector<double>& v = times[size_t(k)];
    if (t.failed[size_t(k)] != 0 || v.empty()) continue;
    std::sort(v.begin(), v.end());
    const size_t m = v.size() / 2;
    median[size_t(k)] = v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
  }
  const double base = median[0];
  int best = t.baseline;
  double best_s = base;
  for (int k = 1; k < n; ++k)
    if (median[size_t(k)] >= 0 && (best_s < 0 || median[size_t(k)] < best_s))
      best = t.baseline + k, best_s = median[size_t(k)];
  // the baseline stays unless the fastest beats it by the margin (a failed baseline: the fastest that ran)
  if (base >= 0 && best_s > base * (1.0 - kMargin)) best = t.baseline, best_s = base;
  const double gain = base > 0 && best_s > 0 ? base / best_s : 1.0;
  chosen_[key] = best;
  gains_[key] = gain;
  std::ostringstream line;
  line << (t.label.empty() ? "GEMM" : t.label) << ":" << std::fixed << std::setprecision(3);
  for (int k = 0; k < n; ++k) {
    line << (k == 0 ? " " : ", ") << t.baseline + k << " ";
    if (median[size_t(k)] < 0)
      line << "-";
    else
      line << median[size_t(k)] * 1e3;
  }
  line << " ms; kept " << best << std::setprecision(2) << " (" << gain << "x)";
  details_[key] = line.str();
  trials_.erase(key);  // t dangles from here
}

bool GemmTuner::decided(const std::vector<int64_t>& key) const {
  const std::lock_guard<std::mutex> lock(mu_);
  return chosen_.count(key) != 0;
}

int GemmTuner::choice(const std::vector<int64_t>& key) const {
  const std::lock_guard<std::mutex> lock(mu_);
  auto it = chosen_.find(key);
  return it == chosen_.end() ? 0 : it->second;
}

size_t GemmTuner::trials_in_progress() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return trials_.size();
}

std::map<std::vector<int64_t>, int> GemmTuner::choices() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return chosen_;
}

std::string GemmTuner::summary() const {
  const std::lock_guard<std::mutex> lock(mu_);
  if (gains_.empty()) return {};
  std::vector<double> faster;
  for (const auto& [key, gain] : gains_)
    if (gain > 1.0) faster.push_back(gain);
  std::sort(faster.rbegin(), faster.rend());
  std::ostringstream out;
  out << "GEMM tuner: " << gains_.size() << " GEMM shape(s) timed in training, " << faster.size()
      << " run faster than the baseline (cuBLASLt's first-ranked algorithm or cublasGemmEx)";
  out << std::fixed << std::setprecision(2);
  for (size_t i = 0; i < faster.size(); ++i) out << (i == 0 ? ": " : ", ") << faster[i] << "x";
  out << " (--gemm-autotune)";
  return out.str();
}

std::vector<std::string> GemmTuner::details() const {
  const std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> lines;
  for (const auto& [key, line] : details_) lines.push_back(line);
  return lines;
}

void GemmTuner::keep_record(const std::vector<int64_t>& key, std::vector<uint64_t> record) {
  const std::lock_guard<std::mutex> lock(mu_);
  records_[key] = std::move(record);
}

std::vector<uint64_t> GemmTuner::record(const std::vector<int64_t>& key) const {
  const std::lock_guard<std::mutex> lock(mu_);
  auto it = records_.find(key);
  return it == records_.end() ? std::vector<uint64_t>{} : it->second;
}

GemmTuner& gemm_tuner() {
  static GemmTuner tuner;
  return tuner;
}

}  // namespace megaton::ops
