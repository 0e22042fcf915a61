// The flat-buffer layout shared by DP buckets and the optimizer: reverse order, bucket sizes, ZeRO padding and shards.
#include <gtest/gtest.h>

#include "parallel/data/data_parallel_layout.h"

using namespace megaton;

namespace {
parallel::ParamList params_of(const std::vector<int64_t>& sizes) {
  parallel::ParamList ps;
  for (size_t i = 0; i < sizes.size(); ++i) {
    parallel::ParamInfo p;
    p.name = "p" + std::to_string(i);
    p.param = torch::zeros({sizes[i]});
    ps.push_back(p);
  }
  return ps;
}
}  // namespace

TEST(OptimBufferLayout, ReverseOrderAndBuckets) {
  auto ps = params_of({10, 20, 5, 7});
  parallel::BufferLayout l(ps, 12, 1);
  // Reverse order: p3 at 0, p2 at 7, p1 at 12, p0 at 32. Buckets close once >= 12 elements: {p3,p2}, {p1}, {p0}.
  EXPECT_EQ(l.slots()[3].offset, 0);
  EXPECT_EQ(l.slots()[2].offset, 7);
  EXPECT_EQ(l.slots()[1].offset, 12);
  EXPECT_EQ(l.slots()[0].offset, 32);
  ASSERT_EQ(l.buckets().size(), 3u);
  EXPECT_EQ(l.buckets()[0].numel, 12);
  EXPECT_EQ(l.buckets()[1].numel, 20);
  EXPECT_EQ(l.buckets()[2].numel, 10);
  EXPECT_EQ(l.numel(), 42);
  parallel::BufferLayout one(ps, 0, 1);
  EXPECT_EQ(one.buckets().size(), 1u);
}

TEST(OptimBufferLayout, ZeroPaddingAndShardsCoverEveryElementOnce) {
  auto ps = params_of({10, 20, 5, 7});
  for (int dp : {1, 2, 3, 4}) {
    parallel::BufferLayout l(ps, 12, dp);
    std::vector<int> hits(42, 0);  // element counts per flattened parameter, concatenated p0..p3
    const std::vector<int64_t> base = {0, 10, 30, 35};
    int64_t shard_total = 0;
    for (const auto& b : l.buckets()) EXPECT_EQ(b.numel % dp, 0);
    for (int r = 0; r < dp; ++r) {
      for (const auto& piece : l.shard_pieces(r, dp)) {
        EXPECT_LT(piece.buffer_offset + piece.numel, l.shard_numel(dp) + 1);
        for (int64_t k = 0; k < piece.numel; ++k) hits[base[piece.param] + piece.param_offset + k]++;
      }
      shard_total += l.shard_numel(dp);
    }
    EXPECT_EQ(shard_total, l.numel());
    for (size_t k = 0; k < hits.size(); ++k) EXPECT_EQ(hits[k], 1) << "dp " << dp << " element " << k;
  }
}
