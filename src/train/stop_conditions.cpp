#include "train/stop_conditions.h"

#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace megaton::train {

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::kExitInterval:
      return "--exit-interval reached";
    case StopReason::kDuration:
      return "--exit-duration-in-mins reached";
    case StopReason::kKillSwitch:
      return "kill switch file found";
    case StopReason::kSignal:
      return "SIGTERM/SIGUSR1 received";
    default:
      return "done";
  }
}

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// When this process started (Linux: /proc/self/stat's start time after boot, plus the boot time), else now.
double process_start_seconds() {
  std::ifstream stat("/proc/self/stat"), proc_stat("/proc/stat");
  std::string line;
  if (!std::getline(stat, line)) return now_seconds();
  const size_t close = line.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return now_seconds();
  std::istringstream fields(line.substr(close + 2));
  std::string field;
  unsigned long long start_ticks = 0;
  for (int i = 3; i <= 22 && fields >> field; ++i)
    if (i == 22) start_ticks = std::stoull(field);
  long long boot_time = 0;
  while (std::getline(proc_stat, line))
    if (line.rfind("btime ", 0) == 0) boot_time = std::stoll(line.substr(6));
  const long ticks = ::sysconf(_SC_CLK_TCK);
  if (start_ticks == 0 || boot_time == 0 || ticks <= 0) return now_seconds();
  const double start = double(boot_time) + double(start_ticks) / double(ticks);
  return start <= now_seconds() ? start : now_seconds();
}

}  // namespace

StopConditions::StopConditions(const LoopOptions& loop, const dist::ProcessGroups& groups)
    : loop_(loop), groups_(groups), signals_(std::make_unique<StopSignals>()) {
  // The earliest start over the ranks: MAX of the negated times (in double: seconds since 1970 need 31 bits).
  torch::Tensor t = torch::tensor({-process_start_seconds()}, torch::kFloat64);
  groups_.host->all_reduce(t, dist::ReduceOp::kMax);
  start_seconds_ = -t.item<double>();
}

double StopConditions::minutes_since_start() const {
  return (now_seconds() - start_seconds_) / 60.0;
}

bool StopConditions::kill_switch_present() const {
  return !loop_.kill_switch_path.empty() && std::filesystem::exists(loop_.kill_switch_path);
}

bool StopConditions::kill_switch_at_start() {
  torch::Tensor r = torch::tensor({kill_switch_present() ? 1.0f : 0.0f});
  groups_.host->all_reduce(r, dist::ReduceOp::kMax);
  return r.item<float>() > 0;
}

StopReason StopConditions::agree(int64_t iteration) {
  const double elapsed_min = minutes_since_start();
  StopReason reason = StopReason::kNone;
  auto raise = [&](StopReason r) { reason = std::max(reason, r); };
  if (signals_->received() != 0) raise(StopReason::kSignal);
  if (kill_switch_present()) raise(StopReason::kKillSwitch);
  if (loop_.exit_duration_in_mins > 0 && elapsed_min > double(loop_.exit_duration_in_mins))
    raise(StopReason::kDuration);
  if (loop_.exit_interval > 0 && iteration % loop_.exit_interval == 0) raise(StopReason::kExitInterval);
  // Agreed over MPI on the host: a device all-reduce here would make every iteration wait for the GPU to drain.
  torch::Tensor r = torch::tensor({static_cast<float>(static_cast<int>(reason))});
  groups_.host->all_reduce(r, dist::ReduceOp::kMax);
  return static_cast<StopReason>(static_cast<int>(r.item<float>()));
}

}  // namespace megaton::train
