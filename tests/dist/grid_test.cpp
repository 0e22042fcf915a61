#include "dist/grid.h"

#include <gtest/gtest.h>

#include <set>

#include "core/error.h"

using megaton::dist::RankGrid;

TEST(RankGrid, MegatronOrderSixteenRanks) {
  // Megatron's initialize_model_parallel docstring: 16 GPUs, TP=2, PP=4 -> DP=2.
  RankGrid g(16, 2, 4);
  EXPECT_EQ(g.dp_size(), 2);
  EXPECT_EQ(g.tp_group(0), (std::vector<int>{0, 1}));
  EXPECT_EQ(g.tp_group(15), (std::vector<int>{14, 15}));
  EXPECT_EQ(g.dp_group(0), (std::vector<int>{0, 2}));
  EXPECT_EQ(g.dp_group(5), (std::vector<int>{5, 7}));
  EXPECT_EQ(g.pp_group(0), (std::vector<int>{0, 4, 8, 12}));
  EXPECT_EQ(g.pp_group(3), (std::vector<int>{3, 7, 11, 15}));
  EXPECT_EQ(g.embedding_group(6), (std::vector<int>{2, 14}));
  EXPECT_EQ(g.mp_group(2), (std::vector<int>{2, 3, 6, 7, 10, 11, 14, 15}));
}

TEST(RankGrid, CoordsRoundTripAndGroupsPartitionTheWorld) {
  for (auto [w, tp, pp] : std::vector<std::tuple<int, int, int>>{{8, 2, 2}, {8, 1, 8}, {12, 2, 3}, {1, 1, 1}}) {
    RankGrid g(w, tp, pp);
    std::set<std::vector<int>> tps, dps, pps;
    for (int r = 0; r < w; ++r) {
      EXPECT_EQ(g.rank(g.coords(r)), r);
      tps.insert(g.tp_group(r));
      dps.insert(g.dp_group(r));
      pps.insert(g.pp_group(r));
      EXPECT_EQ(g.coords(g.tp_group(r)[g.coords(r).tp]).tp, g.coords(r).tp);
    }
    EXPECT_EQ(static_cast<int>(tps.size()), w / tp);
    EXPECT_EQ(static_cast<int>(dps.size()), w / g.dp_size());
    EXPECT_EQ(static_cast<int>(pps.size()), w / pp);
  }
}

TEST(RankGrid, RejectsIndivisibleWorld) {
  EXPECT_THROW(RankGrid(6, 4, 1), megaton::UsageError);
  EXPECT_THROW(RankGrid(8, 0, 1), megaton::UsageError);
  try {
    RankGrid(6, 2, 2);
    FAIL();
  } catch (const megaton::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("world size (6)"), std::string::npos);
  }
}
