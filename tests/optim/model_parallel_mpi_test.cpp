// The optimizer's agreements over model parallelism, on synthetic TP/PP shards: the global grad norm counts
// TP-partitioned shards once each, TP-replicated parameters once (not TP times) and the tied embedding once (first
// stage), with and without ZeRO-1, and so does the params norm (--log-params-norm); an inf on one rank makes every rank
// skip the step.
#include <torch/torch.h>

#include "optim/optim_mpi_test_util.h"
#include "optim/optimizer.h"
#include "parallel/data/data_parallel.h"
#include "support/mpi_fixture.h"

using namespace megaton;

namespace {

// Full (unsharded) gradients of a model with a TP-partitioned weight A [4, 6] (split on dim 0), a replicated bias
// B [5], a tied embedding E [4, 4] (vocab-parallel: split on dim 0) (one copy on the first and on the last stage) and a
// per-stage weight C [7].
torch::Tensor grad_a() {
  return torch::arange(24, torch::kFloat32).view({4, 6}) * 0.01f;
}
torch::Tensor grad_b() {
  return torch::linspace(-1, 1, 5);
}
torch::Tensor grad_e(int pp) {
  return torch::full({4, 4}, 0.1f * (pp + 1));
}
torch::Tensor grad_c(int pp) {
  return torch::arange(7, torch::kFloat32) * 0.1f * (pp + 2);
}

struct Shards {
  parallel::ParamList params;
  std::vector<torch::Tensor> grads;  // this rank's share of the full gradients, same order
};

Shards make_shards(const dist::ProcessGroups& g) {
  const int tp = g.coords.tp, tps = g.grid.tp_size(), pp = g.coords.pp, pps = g.grid.pp_size();
  Shards s;
  auto add = [&](const std::string& name, torch::Tensor grad, int partition_dim, bool tied, bool no_wd) {
    parallel::ParamInfo p;
    p.name = name;
    p.param = torch::ones(grad.sizes(), torch::requires_grad());
    p.partition_dim = partition_dim;
    p.tied_embedding = tied;
    p.no_weight_decay = no_wd;
    s.params.push_back(p);
    s.grads.push_back(grad);
  };
  const bool first = pp == 0, last = pp == pps - 1;
  if (first || last)
    add("embedding.word_embeddings.weight", grad_e(pp).chunk(tps, 0)[tp].contiguous(), 0, pps > 1, false);
  add("layers." + std::to_string(pp) + ".a.weight", grad_a().chunk(tps, 0)[tp].contiguous(), 0, false, false);
  add("layers." + std::to_string(pp) + ".b.bias", grad_b(), -1, false, true);
  add("layers." + std::to_string(pp) + ".c.weight", grad_c(pp), -1, false, false);
  return s;
}

double expected_norm(int pps) {
  double sq = grad_a().pow(2).sum().item<double>() * pps + grad_b().pow(2).sum().item<double>() * pps;
  torch::Tensor e = torch::zeros({4, 4});
  for (int pp : {0, pps - 1}) {
    e += grad_e(pp);
    if (pps == 1) break;
  }
  sq += e.pow(2).sum().item<double>();
  for (int pp = 0; pp < pps; ++pp) sq += grad_c(pp).pow(2).sum().item<double>();
  return std::sqrt(sq);
}

// The weights after one SGD step (lr 0.1, no clipping) from all-ones, counted with the grad norm's rule: the tied
// embedding once (its two copies step with the sum of their gradients).
double expected_params_norm(int pps) {
  auto sq = [](const torch::Tensor& g) { return (1.0 - 0.1 * g.to(torch::kFloat64)).pow(2).sum().item<double>(); };
  double s = (sq(grad_a()) + sq(grad_b())) * pps + sq(pps == 1 ? grad_e(0) : grad_e(0) + grad_e(pps - 1));
  for (int pp = 0; pp < pps; ++pp) s += sq(grad_c(pp));
  return std::sqrt(s);
}

optim::OptimizerOptions sgd() {
  optim::OptimizerOptions o;
  o.kind = "sgd";
  o.lr = 0.1;
  o.sgd_momentum = 0.0;
  o.weight_decay = 0.0;
  o.clip_grad = 1e6;  // norm computed, no clipping
  o.log_num_zeros_in_grad = true;
  return o;
}

void check_norm(int tp, int pp, bool zero1) {
  auto groups = mpitest::cpu_groups(tp, pp);
  auto shards = make_shards(groups);
  parallel::DataParallelOptions o;
  o.zero1 = zero1;
  o.bucket_size_mb = 8.0 * 4 / (1024.0 * 1024.0);
  parallel::DataParallel dp(shards.params, groups, o);
  optim::MixedPrecisionOptimizer opt(dp, groups, sgd(), nullptr);
  opt.zero_grad();
  for (size_t i = 0; i < shards.params.size(); ++i) dp.main_grad(i).copy_(shards.grads[i]);
  const auto r = opt.step();
  ASSERT_TRUE(r.updated && r.grad_norm && r.num_zeros);
  EXPECT_NEAR(*r.grad_norm, expected_norm(pp), 1e-5) << "TP=" << tp << " PP=" << pp << " zero1=" << zero1;
  // Zeros, counted with the same rule: A, B and C each hold exactly one 0 per stage; E none.
  EXPECT_EQ(*r.num_zeros, 3 * pp) << "TP=" << tp << " PP=" << pp;
  EXPECT_TRUE(mpitest::all_ranks(std::abs(*r.grad_norm - expected_norm(pp)) < 1e-5));
  // --log-params-norm: the masters after the step, each parameter once.
  const double params_norm = *opt.params_norm();
  EXPECT_NEAR(params_norm, expected_params_norm(pp), 1e-5) << "TP=" << tp << " PP=" << pp << " zero1=" << zero1;
  EXPECT_TRUE(mpitest::all_ranks(std::abs(params_norm - expected_params_norm(pp)) < 1e-5));
}

}  // namespace

TEST(OptimModelParallel, GradNormTp1Pp1) {
  check_norm(1, 1, false);
}
TEST(OptimModelParallel, GradNormTp2) {
  REQUIRE_WORLD_DIVISIBLE_BY(2);
  check_norm(2, 1, false);
  check_norm(2, 1, true);
}
TEST(OptimModelParallel, GradNormPp2TiedEmbedding) {
  REQUIRE_WORLD_DIVISIBLE_BY(2);
  check_norm(1, 2, false);
  check_norm(1, 2, true);
}
TEST(OptimModelParallel, GradNormTp2Pp2) {
  REQUIRE_WORLD_DIVISIBLE_BY(4);
  check_norm(2, 2, false);
  check_norm(2, 2, true);
}

TEST(OptimModelParallel, InfOnOneRankSkipsTheStepEverywhere) {
  REQUIRE_WORLD_DIVISIBLE_BY(2);
  for (bool zero1 : {false, true}) {
    auto groups = mpitest::cpu_groups(2, 1);
    auto shards = make_shards(groups);
    for (auto& p : shards.params) p.param = p.param.detach().to(torch::kFloat16).set_requires_grad(true);
    parallel::DataParallelOptions o;
    o.zero1 = zero1;
    parallel::DataParallel dp(shards.params, groups, o);
    optim::MixedPrecisionOptimizer opt(dp, groups, sgd(), std::make_unique<optim::ConstantGradScaler>(8.0));
    const auto before = dp.param_buffer().clone();
    opt.zero_grad();
    for (size_t i = 0; i < shards.params.size(); ++i) dp.main_grad(i).copy_(shards.grads[i] * 8.0);
    if (groups.rank == mpitest::world_size() - 1)
      dp.main_grad(0).view({-1})[0] = std::numeric_limits<float>::infinity();
    const auto r = opt.step();
    EXPECT_TRUE(mpitest::all_ranks(!r.updated)) << "zero1 " << zero1;
    EXPECT_TRUE(mpitest::all_ranks(torch::equal(dp.param_buffer(), before)));
    EXPECT_EQ(opt.skipped_steps(), 1);
    // Next iteration, clean on every rank: all update.
    opt.zero_grad();
    for (size_t i = 0; i < shards.params.size(); ++i) dp.main_grad(i).copy_(shards.grads[i] * 8.0);
    EXPECT_TRUE(mpitest::all_ranks(opt.step().updated));
  }
}
