#include "optim/flat_runs.h"

#include <algorithm>

namespace megaton::optim {

std::vector<Run> merge_runs(const std::vector<parallel::ParamPiece>& pieces, const parallel::ParamList& params,
                            const std::function<bool(const parallel::ParamInfo&)>& keep) {
  std::vector<Run> runs;
  for (const auto& p : pieces) {
    if (!keep(params[p.param])) continue;
    runs.push_back(Run{p.buffer_offset, p.numel});
  }
  std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.offset < b.offset; });
  std::vector<Run> merged;
  for (const Run& r : runs) {
    if (!merged.empty() && merged.back().offset + merged.back().numel == r.offset)
      merged.back().numel += r.numel;
    else
      merged.push_back(r);
  }
  return merged;
}

std::vector<torch::Tensor> run_views(const torch::Tensor& buffer, const std::vector<Run>& runs) {
  std::vector<torch::Tensor> views;
  views.reserve(runs.size());
  for (const Run& r : runs) views.push_back(buffer.narrow(0, r.offset, r.numel));
  return views;
}

bool covers_all(const std::vector<Run>& runs, int64_t n) {
  return runs.size() == 1 && runs[0].offset == 0 && runs[0].numel == n;
}

}  // namespace megaton::optim
