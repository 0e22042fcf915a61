// Data-parallel gradient reduction: averaged main grads equal the full-batch gradient computed on one rank, with and
// without overlap (hooks starting bucket reductions), over several micro-batches and buckets; tied-embedding sum over
// the embedding group.
#include <torch/torch.h>

#include "optim/optim_mpi_test_util.h"
#include "parallel/data/data_parallel.h"
#include "support/mpi_fixture.h"

using namespace megaton;

namespace {

void check_dp_average(bool overlap, bool zero1) {
  const int world = mpitest::world_size();
  auto groups = mpitest::cpu_groups(1, 1);  // DP = world
  mpitest::TinyModel m;
  parallel::DataParallelOptions o;
  o.bucket_size_mb = 30.0 * 4 / (1024.0 * 1024.0);  // ~30 elements: several buckets
  o.overlap_grad_reduce = overlap;
  o.zero1 = zero1;
  parallel::DataParallel dp(m.params, groups, o);
  ASSERT_GT(dp.layout().buckets().size(), 1u);
  const int r = groups.dp->rank(), micro = 2;
  dp.zero_grad();
  for (int mb = 0; mb < micro; ++mb) {
    dp.set_last_microbatch(mb == micro - 1);
    auto b = mpitest::batch_for(0, mb, r);
    m.loss(b.x, b.y).backward();
  }
  if (overlap) EXPECT_EQ(dp.buckets_started(), static_cast<int>(dp.layout().buckets().size()));
  dp.finish_grad_sync();

  // Reference: sum over micro-batches, mean over ranks, of every rank's gradients, computed here on one model.
  mpitest::TinyModel ref;
  for (int q = 0; q < world; ++q)
    for (int mb = 0; mb < micro; ++mb) {
      auto b = mpitest::batch_for(0, mb, q);
      (ref.loss(b.x, b.y) / world).backward();
    }
  if (!dp.shard_is_whole()) {
    // ZeRO-1: only this rank's shard holds reduced gradients.
    for (const auto& piece : dp.shard_pieces()) {
      auto got = dp.shard_grad().narrow(0, piece.buffer_offset, piece.numel);
      auto want = ref[piece.param].grad().reshape({-1}).narrow(0, piece.param_offset, piece.numel);
      EXPECT_LT(mpitest::max_abs_diff(got, want), 1e-6) << m.params[piece.param].name;
    }
  } else {
    for (size_t i = 0; i < m.params.size(); ++i)
      EXPECT_LT(mpitest::max_abs_diff(dp.main_grad(i), ref[i].grad()), 1e-6) << m.params[i].name;
  }
}

}  // namespace

TEST(DataParallel, OverlappedBucketsAverageOverDP) {
  check_dp_average(true, false);
}
TEST(DataParallel, SynchronousFallbackAveragesOverDP) {
  check_dp_average(false, false);
}
TEST(DataParallel, Zero1ReduceScattersIntoShards) {
  check_dp_average(true, true);
}
TEST(DataParallel, Zero1WithoutOverlapReduceScattersIntoShards) {
  check_dp_average(false, true);
}

TEST(DataParallel, TiedEmbeddingSummedOverEmbeddingGroupThenAveragedOverDP) {
  REQUIRE_WORLD_DIVISIBLE_BY(2);
  auto groups = mpitest::cpu_groups(1, 2);
  const int pp = groups.coords.pp, d = groups.coords.dp, dps = groups.grid.dp_size();
  parallel::ParamList ps(2);
  ps[0].name = "embedding.word_embeddings.weight";
  ps[0].param = torch::zeros({6, 4}, torch::requires_grad());
  ps[0].tied_embedding = true;
  ps[1].name = pp == 0 ? "layers.0.weight" : "layers.1.weight";
  ps[1].param = torch::zeros({5}, torch::requires_grad());
  auto g_emb = [](int pp, int d) { return torch::arange(24, torch::kFloat32).view({6, 4}) * (1 + pp) + 100 * d; };
  auto g_other = [](int pp, int d) { return torch::full({5}, 1.0f + pp + 10 * d); };
  for (bool zero1 : {false, true}) {
    parallel::DataParallelOptions o;
    o.bucket_size_mb = 0;  // one bucket, holding the embedding: it must wait for the embedding sum
    o.zero1 = zero1;
    parallel::DataParallel dp(ps, groups, o);
    dp.zero_grad();
    ps[0].param.mutable_grad() = g_emb(pp, d);
    ps[1].param.mutable_grad() = g_other(pp, d);
    dp.accumulate_param_grads();
    dp.finish_grad_sync();
    torch::Tensor want_emb = torch::zeros({6, 4}), want_other = torch::zeros({5});
    for (int q = 0; q < dps; ++q) {
      want_emb += (g_emb(0, q) + g_emb(1, q)) / dps;
      want_other += g_other(pp, q) / dps;
    }
    auto full = torch::zeros({dp.layout().numel()});
    dp.all_gather_into(full, dp.shard_grad());  // whole reduced buffer on every rank (a copy without ZeRO)
    const auto& s = dp.layout().slots();
    EXPECT_LT(mpitest::max_abs_diff(full.narrow(0, s[0].offset, 24).view({6, 4}), want_emb), 1e-4) << "zero1 " << zero1;
    EXPECT_LT(mpitest::max_abs_diff(full.narrow(0, s[1].offset, 5), want_other), 1e-5) << "zero1 " << zero1;
  }
}

TEST(DataParallel, SyncTpDuplicatedAveragesOnlyReplicatedGradsOverTP) {
  REQUIRE_WORLD_DIVISIBLE_BY(2);
  auto groups = mpitest::cpu_groups(2, 1);
  const int t = groups.coords.tp, d = groups.coords.dp, dps = groups.grid.dp_size();
  parallel::ParamList ps(2);
  ps[0].name = "layers.0.input_layernorm.weight";  // replicated over TP
  ps[0].param = torch::zeros({5}, torch::requires_grad());
  ps[1].name = "layers.0.attention.qkv.weight";  // split over TP
  ps[1].param = torch::zeros({4}, torch::requires_grad());
  ps[1].partition_dim = 0;
  auto g = [](int t, int d, int n) { return torch::arange(n, torch::kFloat32) + 10 * t + 100 * d; };
  for (bool zero1 : {false, true}) {
    parallel::DataParallelOptions o;
    o.zero1 = zero1;
    parallel::DataParallel dp(ps, groups, o);
    dp.zero_grad();
    ps[0].param.mutable_grad() = g(t, d, 5);
    ps[1].param.mutable_grad() = g(t, d, 4);
    dp.accumulate_param_grads();
    dp.finish_grad_sync();
    dp.average_tp_replicated_grads(*groups.tp);
    torch::Tensor want_rep = torch::zeros({5}), want_split = torch::zeros({4});
    for (int q = 0; q < dps; ++q) {
      want_rep += (g(0, q, 5) + g(1, q, 5)) / (2.0 * dps);  // DP average, then TP average
      want_split += g(t, q, 4) / double(dps);               // DP average only
    }
    auto full = torch::zeros({dp.layout().numel()});
    dp.all_gather_into(full, dp.shard_grad());
    const auto& s = dp.layout().slots();
    EXPECT_LT(mpitest::max_abs_diff(full.narrow(0, s[0].offset, 5), want_rep), 1e-5) << "zero1 " << zero1;
    EXPECT_LT(mpitest::max_abs_diff(full.narrow(0, s[1].offset, 4), want_split), 1e-5) << "zero1 " << zero1;
  }
}

// ZeRO-1's overlapped parameter all-gather: started, then waited for parameter by parameter in forward order, it
// writes exactly what the blocking all-gather writes; a parameter's wait completes its whole bucket, and what is not
// waited for is still in flight until finish_param_gather.
TEST(DataParallel, StartedParamGatherEqualsBlockingOne) {
  const int world = mpitest::world_size();
  if (world < 2) GTEST_SKIP() << "needs DP > 1";
  auto groups = mpitest::cpu_groups(1, 1);  // DP = world
  mpitest::TinyModel m;
  parallel::DataParallelOptions o;
  o.bucket_size_mb = 30.0 * 4 / (1024.0 * 1024.0);  // ~30 elements: several buckets
  o.zero1 = true;
  o.overlap_param_gather = true;
  parallel::DataParallel dp(m.params, groups, o);
  ASSERT_TRUE(dp.overlaps_param_gather());
  ASSERT_GT(dp.layout().buckets().size(), 1u);
  // A different shard on every rank, as after an optimizer step.
  const torch::Tensor shard =
      torch::arange(dp.shard_numel(), torch::kFloat32) * 0.25f + 1000.0f * static_cast<float>(dp.dp_rank() + 1);
  dp.all_gather_params(shard);
  const torch::Tensor want = dp.param_buffer().clone();  // [N]
  dp.param_buffer().zero_();

  dp.start_param_gather(shard);
  EXPECT_TRUE(dp.param_gather_pending());
  const auto& slots = dp.layout().slots();
  const size_t first = 0;  // the forward's first parameter sits in the last bucket
  dp.wait_param_gather(first, first + 1);
  const parallel::Bucket& b = dp.layout().buckets()[static_cast<size_t>(slots[first].bucket)];
  EXPECT_TRUE(dp.param_buffer().narrow(0, b.start, b.numel).equal(want.narrow(0, b.start, b.numel)));
  EXPECT_TRUE(dp.param_gather_pending());  // the other buckets are not waited for yet
  for (size_t i = 0; i < m.params.size(); ++i) dp.wait_param_gather(i, i + 1);
  EXPECT_FALSE(dp.param_gather_pending());
  EXPECT_TRUE(dp.param_buffer().equal(want));

  // finish_param_gather waits for everything; the next gather replaces the parameters again.
  dp.start_param_gather(shard * 2);
  dp.finish_param_gather();
  EXPECT_FALSE(dp.param_gather_pending());
  EXPECT_TRUE(dp.param_buffer().equal(want * 2));
}
