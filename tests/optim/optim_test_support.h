// Single-process helpers for the optimizer unit tests: the process groups of a one-rank world, and a tiny synthetic
// model whose ParamList mixes weights (weight
// decay) and biases/LayerNorm (no weight decay).
#pragma once
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "dist/process_groups.h"
#include "dist/self_communicator.h"
#include "parallel/param_info.h"
#include "support/tiny_param_model.h"

namespace megaton::optimtest {

/// The process groups of a one-rank world (dist::single_rank_groups: every collective the identity).
inline dist::ProcessGroups self_groups() {
  return dist::single_rank_groups();
}

using testutil::TinyModel;  // tests/support/tiny_param_model.h

}  // namespace megaton::optimtest
