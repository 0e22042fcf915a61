// Enumerates the layouts `megaton plan` considers (TP inside a node, Megatron's divisibility rules, micro-batch sizes,
// recomputation on/off), predicts each, and ranks them: layouts that fit first, then by predicted time.
#pragma once
#include <optional>
#include <vector>

#include "plan/calibration.h"
#include "plan/cluster.h"
#include "plan/cost_model.h"

namespace megaton::plan {

struct SearchLimits {
  int tp = 0, pp = 0, micro_batch = 0;  // 0: enumerate; > 0: only this value
  int recompute = -1;                   // -1: both; 0: off; 1: on
  int max_micro_batch = 64;
};

/// Every valid layout of the whole cluster (TP divides GPUs per node, PP divides the rest, layers % PP, heads % TP,
/// global batch % (micro-batch x DP)); micro-batch sizes are the divisors of the per-DP batch up to max_micro_batch.
std::vector<Layout> enumerate_layouts(const ModelSpec& spec, const Cluster& c, const SearchLimits& lim);

/// Predictions of every layout, sorted: those that fit first, each group by predicted time.
std::vector<StepPrediction> rank_layouts(const ModelSpec& spec, const Cluster& c, const Calibration& cal,
                                         const SearchLimits& lim);

/// The fastest layout that fits, if any.
std::optional<StepPrediction> recommend(const std::vector<StepPrediction>& ranked);

}  // namespace megaton::plan
