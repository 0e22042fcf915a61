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

int GemmTuner::choose(const std::vector<int64_t>& key, int baseline, int last,
                      const std::function<double(int)>& seconds, const std::string& label) {
  const std::lock_guard<std::mutex> lock(mu_);
  if (!enabled_ || last - baseline <= 1) return baseline;
  if (auto it = chosen_.find(key); it != chosen_.end()) return it->second;
  // mean seconds per call of each candidate over the measured rounds; < 0 once it failed
  std::vector<double> mean(size_t(last - baseline), 0.0);
  for (int round = 0; round <= kRounds; ++round) {
    for (int i = 0; i < last - baseline; ++i) {
      const int c = round % 2 == 0 ? baseline + i : last - 1 - i;
      double& m = mean[size_t(c - baseline)];
      if (m < 0) continue;
      const double s = seconds(c);
      m = s < 0 ? -1.0 : (round == 0 ? 0.0 : m + s / kRounds);
    }
  }
  const double base = mean[0];
  int best = baseline;
  double best_s = base;
  for (int c = baseline + 1; c < last; ++c) {
    const double s = mean[size_t(c - baseline)];
    if (s >= 0 && (best_s < 0 || s < best_s)) best = c, best_s = s;
  }
  // the baseline stays unless the fastest beats it by the margin (a failed baseline: the fastest that ran)
  if (base >= 0 && best_s > base * (1.0 - kMargin)) best = baseline, best_s = base;
  const double gain = base > 0 && best_s > 0 ? base / best_s : 1.0;
  chosen_.emplace(key, best);
  gains_.emplace(key, gain);
  std::ostringstream line;
  line << (label.empty() ? "GEMM" : label) << ":" << std::fixed << std::setprecision(3);
  for (int c = baseline; c < last; ++c) {
    const double s = mean[size_t(c - baseline)];
    line << (c == baseline ? " " : ", ") << c << " ";
    if (s < 0)
      line << "-";
    else
      line << s * 1e3;
  }
  line << " ms; kept " << best << std::setprecision(2) << " (" << gain << "x)";
  details_.emplace(key, line.str());
  return best;
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
  out << "GEMM tuner: " << gains_.size() << " GEMM shape(s) timed on their first call, " << faster.size()
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
