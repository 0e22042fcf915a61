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

/// y = ln_w * x; h = tanh(W1 y + b1); out = W2 h + b2   (x [b, 4], out [b, 3]); same weights for the same seed.
struct TinyModel {
  parallel::ParamList params;
  explicit TinyModel(torch::ScalarType dtype = torch::kFloat32, uint64_t seed = 7) {
    torch::manual_seed(seed);
    add("ln.weight", torch::ones({4}) + 0.1 * torch::randn({4}), true, dtype);
    add("fc1.weight", torch::randn({8, 4}) * 0.5, false, dtype);
    add("fc1.bias", torch::randn({8}) * 0.1, true, dtype);
    add("fc2.weight", torch::randn({3, 8}) * 0.5, false, dtype);
    add("fc2.bias", torch::randn({3}) * 0.1, true, dtype);
  }
  void add(const std::string& name, torch::Tensor init, bool no_wd, torch::ScalarType dtype) {
    parallel::ParamInfo p;
    p.name = name;
    p.param = init.to(dtype).set_requires_grad(true);
    p.global_shape = init.sizes().vec();
    p.no_weight_decay = no_wd;
    params.push_back(p);
  }
  const torch::Tensor& operator[](size_t i) const { return params[i].param; }
  torch::Tensor loss(const torch::Tensor& x, const torch::Tensor& target) const {
    auto f = [](const torch::Tensor& t) { return t.to(torch::kFloat32); };
    auto y = x * f(params[0].param);
    auto h = torch::tanh(torch::matmul(y, f(params[1].param).t()) + f(params[2].param));
    auto out = torch::matmul(h, f(params[3].param).t()) + f(params[4].param);
    return (out - target).pow(2).mean();
  }
};

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
