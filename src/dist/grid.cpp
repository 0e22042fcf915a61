#include "dist/grid.h"

#include "core/error.h"

namespace megaton::dist {

RankGrid::RankGrid(int world, int tp, int pp) : world_(world), tp_(tp), pp_(pp), dp_(0) {
  MEGATON_CHECK(world >= 1, UsageError, "world size must be >= 1, got ", world);
  MEGATON_CHECK(tp >= 1, UsageError, "--tensor-model-parallel-size must be >= 1, got ", tp);
  MEGATON_CHECK(pp >= 1, UsageError, "--pipeline-model-parallel-size must be >= 1, got ", pp);
  MEGATON_CHECK(world % (tp * pp) == 0, UsageError, "world size (", world,
                ") must be divisible by --tensor-model-parallel-size x --pipeline-model-parallel-size (", tp, " x ", pp,
                " = ", tp * pp, ")");
  dp_ = world / (tp * pp);
}

Coords RankGrid::coords(int rank) const {
  MEGATON_ASSERT(rank >= 0 && rank < world_, "rank ", rank, " outside world ", world_);
  Coords c;
  c.tp = rank % tp_;
  c.dp = (rank / tp_) % dp_;
  c.pp = rank / (tp_ * dp_);
  return c;
}

int RankGrid::rank(const Coords& c) const {
  MEGATON_ASSERT(c.tp >= 0 && c.tp < tp_ && c.dp >= 0 && c.dp < dp_ && c.pp >= 0 && c.pp < pp_, "bad coords");
  return c.pp * tp_ * dp_ + c.dp * tp_ + c.tp;
}

std::vector<int> RankGrid::tp_group(int r) const {
  Coords c = coords(r);
  std::vector<int> g;
  for (int i = 0; i < tp_; ++i) g.push_back(rank({i, c.dp, c.pp}));
  return g;
}

std::vector<int> RankGrid::dp_group(int r) const {
  Coords c = coords(r);
  std::vector<int> g;
  for (int i = 0; i < dp_; ++i) g.push_back(rank({c.tp, i, c.pp}));
  return g;
}

std::vector<int> RankGrid::pp_group(int r) const {
  Coords c = coords(r);
  std::vector<int> g;
  for (int i = 0; i < pp_; ++i) g.push_back(rank({c.tp, c.dp, i}));
  return g;
}

std::vector<int> RankGrid::mp_group(int r) const {
  Coords c = coords(r);
  std::vector<int> g;
  for (int p = 0; p < pp_; ++p)
    for (int t = 0; t < tp_; ++t) g.push_back(rank({t, c.dp, p}));
  return g;
}

std::vector<int> RankGrid::embedding_group(int r) const {
  Coords c = coords(r);
  if (pp_ == 1) return {r};
  return {rank({c.tp, c.dp, 0}), rank({c.tp, c.dp, pp_ - 1})};
}

std::string RankGrid::describe() const {
  return str("TP=", tp_, " x PP=", pp_, " x DP=", dp_, " (world ", world_, ")");
}

}  // namespace megaton::dist
