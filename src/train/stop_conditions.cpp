#include "train/stop_conditions.h"

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>

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

StopConditions::StopConditions(const LoopOptions& loop, const dist::ProcessGroups& groups)
    : loop_(loop), groups_(groups), signals_(std::make_unique<StopSignals>()) {}

StopReason StopConditions::agree(int64_t iteration, double elapsed_min) {
  StopReason reason = StopReason::kNone;
  auto raise = [&](StopReason r) { reason = std::max(reason, r); };
  if (signals_->received() != 0) raise(StopReason::kSignal);
  if (!loop_.kill_switch_path.empty() && std::filesystem::exists(loop_.kill_switch_path))
    raise(StopReason::kKillSwitch);
  if (loop_.exit_duration_in_mins > 0 && elapsed_min > double(loop_.exit_duration_in_mins))
    raise(StopReason::kDuration);
  if (loop_.exit_interval > 0 && iteration % loop_.exit_interval == 0) raise(StopReason::kExitInterval);
  // Agreed over MPI on the host: a device all-reduce here would make every iteration wait for the GPU to drain.
  torch::Tensor r = torch::tensor({static_cast<float>(static_cast<int>(reason))});
  groups_.host->all_reduce(r, dist::ReduceOp::kMax);
  return static_cast<StopReason>(static_cast<int>(r.item<float>()));
}

}  // namespace megaton::train
