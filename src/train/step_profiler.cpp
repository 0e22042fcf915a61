#include "train/step_profiler.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "core/error.h"

namespace megaton {

namespace {

namespace prof = torch::autograd::profiler;
namespace impl = torch::profiler::impl;

// KinetoEvent reports microseconds in LibTorch 1.x (durationUs) and nanoseconds in 2.x (durationNs).
template <typename E>
auto duration_us(const E& e, int) -> decltype(static_cast<double>(e.durationNs()) / 1000.0) {
  return static_cast<double>(e.durationNs()) / 1000.0;
}
template <typename E>
double duration_us(const E& e, long) {
  return static_cast<double>(e.durationUs());
}

}  // namespace

std::string format_profile_summary(std::vector<ProfileRow> rows, int64_t steps) {
  std::map<std::string, double> device_total;
  for (const auto& r : rows) device_total[r.device] += r.total_us;
  std::sort(rows.begin(), rows.end(), [](const ProfileRow& a, const ProfileRow& b) {
    return a.device != b.device ? a.device > b.device : a.total_us > b.total_us;  // cuda before cpu
  });
  std::ostringstream os;
  const double per = static_cast<double>(std::max<int64_t>(steps, 1));
  std::string device;
  char line[512];
  for (const auto& r : rows) {
    if (r.device != device) {
      device = r.device;
      const bool cuda = device == "cuda";
      std::snprintf(line, sizeof(line), "# %s: %.3f ms per step over %lld profiled step(s)%s\n", device.c_str(),
                    device_total[device] / 1000.0 / per, static_cast<long long>(steps),
                    cuda ? " (kernels and copies, summed)" : " (ops, inclusive of the ops they call)");
      os << line;
      std::snprintf(line, sizeof(line), "%-6s %10s %12s %12s %7s  %s\n", "device", "calls", "total_ms", "ms/step",
                    "share", "name");
      os << line;
    }
    const double share = device_total[device] > 0 ? 100.0 * r.total_us / device_total[device] : 0.0;
    std::snprintf(line, sizeof(line), "%-6s %10lld %12.3f %12.3f %6.1f%%  %s\n", r.device.c_str(),
                  static_cast<long long>(r.calls), r.total_us / 1000.0, r.total_us / 1000.0 / per, share,
                  r.name.substr(0, 200).c_str());
    os << line;
  }
  return os.str();
}

StepProfiler::StepProfiler(const train::LoggingOptions& logging, int rank, bool cuda)
    : start_(logging.profile_step_start),
      end_(logging.profile_step_end),
      dir_(logging.profile_dir),
      rank_(rank),
      cuda_(cuda) {
  const auto& ranks = logging.profile_ranks;
  mine_ = logging.profile && std::find(ranks.begin(), ranks.end(), int64_t{rank}) != ranks.end();
}

StepProfiler::~StepProfiler() {
  if (!active_) return;
  try {
    prof::disableProfiler();  // a run that ended inside the window: drop the partial record
  } catch (...) {
  }
}

void StepProfiler::before_step(int64_t iteration) {
  if (!mine_ || active_ || iteration != start_) return;
  std::set<impl::ActivityType> activities{impl::ActivityType::CPU};
  if (cuda_) activities.insert(impl::ActivityType::CUDA);
  const impl::ProfilerConfig config(impl::ProfilerState::KINETO);
  try {
    prof::prepareProfiler(config, activities);
    prof::enableProfiler(config, activities);
  } catch (const c10::Error& e) {
    throw RuntimeError(str("--profile: LibTorch's profiler could not start: ", e.what_without_backtrace()));
  }
  active_ = true;
}

std::string StepProfiler::after_step(int64_t iteration) {
  if (!active_ || iteration != end_) return {};
  active_ = false;
  if (cuda_) torch::cuda::synchronize();  // the step's last kernels finish inside the record
  std::unique_ptr<prof::ProfilerResult> result;
  try {
    result = prof::disableProfiler();
  } catch (const c10::Error& e) {
    throw RuntimeError(str("--profile: LibTorch's profiler could not stop: ", e.what_without_backtrace()));
  }
  MEGATON_CHECK(result != nullptr, RuntimeError, "--profile: LibTorch's profiler returned no result");
  std::map<std::pair<std::string, std::string>, ProfileRow> by_name;
  for (const auto& e : result->events()) {
    const std::string device = e.deviceType() == c10::DeviceType::CUDA ? "cuda" : "cpu";
    ProfileRow& r = by_name[{device, e.name()}];
    r.device = device;
    r.name = e.name();
    r.calls += 1;
    r.total_us += duration_us(e, 0);
  }
  std::vector<ProfileRow> rows;
  rows.reserve(by_name.size());
  for (auto& [key, row] : by_name) rows.push_back(std::move(row));

  const std::filesystem::path dir(dir_);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  MEGATON_CHECK(!ec, RuntimeError, "--profile-dir ", dir.string(), ": cannot create it (", ec.message(), ")");
  const std::string stem = "rank" + std::to_string(rank_);
  const std::filesystem::path trace = dir / (stem + ".trace.json");
  std::string trace_note = trace.string();
  try {
    result->save(trace_note);
  } catch (const c10::Error& e) {  // LibTorch built without Kineto (Debian's CPU package): the summary still holds
    trace_note = str("none (", e.what_without_backtrace(), ")");
  }
  const std::filesystem::path summary = dir / (stem + ".summary.txt");
  std::ofstream out(summary);
  MEGATON_CHECK(out.good(), RuntimeError, "--profile-dir: cannot write ", summary.string());
  out << "# megaton --profile, rank " << rank_ << ", iterations " << start_ + 1 << ".." << end_
      << "; trace: " << trace_note << "\n"
      << format_profile_summary(std::move(rows), end_ - start_);
  MEGATON_CHECK(out.good(), RuntimeError, "--profile-dir: writing ", summary.string(), " failed");
  return summary.string();
}

}  // namespace megaton
