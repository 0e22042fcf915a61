// Helpers for multi-rank tests: the world size and rank, process groups for a TP x PP grid, and a check that a
// condition holds on every rank (so one rank's failure fails the test on all of them and nobody skips a collective).
#pragma once
#include <gtest/gtest.h>
#include <mpi.h>

#include "dist/process_groups.h"

namespace megaton::mpitest {

inline int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

/// Process groups over MPI for a TP x PP grid of the whole world, with a 120 s collective timeout.
inline dist::ProcessGroups cpu_groups(int tp, int pp) {
  return dist::build_process_groups(dist::RankGrid(world_size(), tp, pp), dist::Backend::kMpi, 120.0);
}

/// True on every rank iff `ok` is true on every rank.
inline bool all_ranks(bool ok) {
  int v = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return v == 1;
}

}  // namespace megaton::mpitest

/// Skips the test (on every rank alike) unless the world size is divisible by n.
#define REQUIRE_WORLD_DIVISIBLE_BY(n)                                                                           \
  do {                                                                                                          \
    if (::megaton::mpitest::world_size() % (n) != 0) GTEST_SKIP() << "needs a multiple of " << (n) << " ranks"; \
  } while (0)
