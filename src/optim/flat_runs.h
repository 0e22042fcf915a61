// Contiguous runs of a flat buffer, and views of them: the optimizer touches a subset of its shard (parameters with
// weight decay, parameters counted in the gradient norm) as a handful of large views rather than one per parameter.
#pragma once
#include <torch/torch.h>

#include <functional>
#include <vector>

#include "parallel/data/data_parallel_layout.h"
#include "parallel/param_info.h"

namespace megaton::optim {

struct Run {
  int64_t offset = 0;
  int64_t numel = 0;
};

/// The shard pieces whose parameter satisfies `keep`, merged where they touch (padding between pieces breaks a run).
std::vector<Run> merge_runs(const std::vector<parallel::ParamPiece>& pieces, const parallel::ParamList& params,
                            const std::function<bool(const parallel::ParamInfo&)>& keep);

/// 1-D views of `buffer` [S], one per run.
std::vector<torch::Tensor> run_views(const torch::Tensor& buffer, const std::vector<Run>& runs);

/// True when the runs are exactly one run covering all of [0, n).
bool covers_all(const std::vector<Run>& runs, int64_t n);

}  // namespace megaton::optim
