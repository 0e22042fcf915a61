// Helpers for the multi-rank optimizer / data-parallel tests: one-rank process groups (for a local reference run on
// every rank), a tiny synthetic model whose initial weights are the same on every rank, and per-rank batches.
#pragma once
#include <mpi.h>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "dist/mpi_communicator.h"
#include "dist/process_groups.h"
#include "parallel/param_info.h"
#include "support/tiny_param_model.h"

namespace megaton::mpitest {

/// Process groups of a one-rank world (MPI_COMM_SELF): the single-rank reference.
inline dist::ProcessGroups self_groups() {
  dist::ProcessGroups g{dist::RankGrid(1, 1, 1)};
  auto make = [](const char* name) {
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_SELF, &c);
    return std::make_shared<dist::MpiCommunicator>(c, name, std::vector<int>{0}, 120.0);
  };
  g.world = make("world");
  g.tp = make("tp");
  g.dp = make("dp");
  g.pp = make("pp");
  g.mp = make("mp");
  g.embedding = make("embedding");
  return g;
}

using testutil::TinyModel;  // tests/support/tiny_param_model.h

struct Batch {
  torch::Tensor x, y;
};

/// The micro-batch `mb` of step `step` for DP rank `r` (deterministic: every rank can build every rank's batch).
inline Batch batch_for(int step, int mb, int r, int64_t size = 3) {
  torch::manual_seed(1000 + 97 * step + 13 * mb + r);
  return {torch::randn({size, 4}), torch::randn({size, 3})};
}

inline double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

}  // namespace megaton::mpitest
