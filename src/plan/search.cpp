#include "plan/search.h"

#include <algorithm>

namespace megaton::plan {

std::vector<Layout> enumerate_layouts(const ModelSpec& spec, const Cluster& c, const SearchLimits& lim) {
  std::vector<Layout> out;
  const int world = c.world();
  for (int tp = 1; tp <= c.gpus_per_node; ++tp) {
    if (c.gpus_per_node % tp || (lim.tp && tp != lim.tp)) continue;
    for (int pp = 1; pp <= world / tp; ++pp) {
      if ((world / tp) % pp || (lim.pp && pp != lim.pp)) continue;
      const int dp = world / (tp * pp);
      if (spec.global_batch % dp) continue;
      const int per_dp = spec.global_batch / dp;
      for (int mb = 1; mb <= std::min(per_dp, lim.max_micro_batch); ++mb) {
        if (per_dp % mb || (lim.micro_batch && mb != lim.micro_batch)) continue;
        for (int rc = 0; rc <= 1; ++rc) {
          if (lim.recompute >= 0 && rc != lim.recompute) continue;
          Layout l{tp, pp, dp, mb, rc == 1};
          if (layout_problem(spec, l).empty()) out.push_back(l);
        }
      }
    }
  }
  return out;
}

std::vector<StepPrediction> rank_layouts(const ModelSpec& spec, const Cluster& c, const Calibration& cal,
                                         const SearchLimits& lim) {
  std::vector<StepPrediction> out;
  for (const Layout& l : enumerate_layouts(spec, c, lim)) out.push_back(predict(spec, l, c, cal));
  std::stable_sort(out.begin(), out.end(), [](const StepPrediction& a, const StepPrediction& b) {
    if (a.fits != b.fits) return a.fits;
    if (a.fits) return a.total_ms < b.total_ms;
    return a.memory.total_gib() < b.memory.total_gib();  // among those that do not fit: the closest first
  });
  return out;
}

std::optional<StepPrediction> recommend(const std::vector<StepPrediction>& ranked) {
  for (const auto& p : ranked)
    if (p.fits) return p;
  return std::nullopt;
}

}  // namespace megaton::plan
