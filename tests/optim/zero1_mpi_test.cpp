// DP = world with and without ZeRO-1 gives the same parameters, Adam state and grad norms as one rank training on
// the whole global batch (fp32, several steps, clipping, weight decay, several buckets with padding).
#include <torch/torch.h>

#include "optim/optim_mpi_test_util.h"
#include "optim/optimizer.h"
#include "parallel/data/data_parallel.h"
#include "support/mpi_fixture.h"

using namespace megaton;

namespace {

optim::OptimizerOptions adam() {
  optim::OptimizerOptions o;
  o.kind = "adam";
  o.lr = 0.02;
  o.weight_decay = 0.1;
  o.adam_beta1 = 0.9;
  o.adam_beta2 = 0.95;
  o.clip_grad = 0.3;  // active: the norms are around 1
  return o;
}

struct Run {
  std::vector<torch::Tensor> params;
  std::vector<double> norms;
  std::map<std::string, optim::ParamState> state;
};

// `steps` steps of 2 micro-batches per DP rank; the single-rank reference runs all ranks' micro-batches itself.
// overlap_gather: the optimizer only starts ZeRO-1's parameter all-gather; each step's forward waits for it first.
Run train(const dist::ProcessGroups& groups, bool zero1, bool reference, int steps, const optim::OptimizerOptions& oo,
          torch::ScalarType dtype = torch::kFloat32, bool overlap_gather = false) {
  const int world = mpitest::world_size(), micro = 2;
  mpitest::TinyModel m(dtype);
  parallel::DataParallelOptions o;
  o.bucket_size_mb = 25.0 * 4 / (1024.0 * 1024.0);
  o.zero1 = zero1;
  o.overlap_param_gather = overlap_gather;
  parallel::DataParallel dp(m.params, groups, o);
  optim::MixedPrecisionOptimizer opt(dp, groups, oo, nullptr);
  Run run;
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    EXPECT_EQ(dp.param_gather_pending(), overlap_gather && zero1 && s > 0 && groups.dp->size() > 1);
    dp.wait_param_gather(0, m.params.size());
    if (reference) {
      dp.set_last_microbatch(true);
      // One micro-batch holding every rank's samples: the mean over the global batch.
      std::vector<torch::Tensor> xs, ys;
      for (int q = 0; q < world; ++q)
        for (int mb = 0; mb < micro; ++mb) {
          auto b = mpitest::batch_for(s, mb, q);
          xs.push_back(b.x);
          ys.push_back(b.y);
        }
      (m.loss(torch::cat(xs), torch::cat(ys)) * micro).backward();  // loss per micro-batch is a mean: scale to match
    } else {
      for (int mb = 0; mb < micro; ++mb) {
        dp.set_last_microbatch(mb == micro - 1);
        auto b = mpitest::batch_for(s, mb, groups.dp->rank());
        m.loss(b.x, b.y).backward();
      }
    }
    auto r = opt.step();
    EXPECT_TRUE(r.updated);
    run.norms.push_back(r.grad_norm ? *r.grad_norm : -1.0);
  }
  dp.finish_param_gather();  // read outside a forward
  for (const auto& p : m.params) run.params.push_back(p.param.detach().clone());
  run.state = opt.state_dict();
  return run;
}

void expect_same(const Run& got, const Run& want, double tol, const std::string& what) {
  for (size_t i = 0; i < want.params.size(); ++i)
    EXPECT_LT(mpitest::max_abs_diff(got.params[i], want.params[i]), tol) << what << " param " << i;
  for (size_t s = 0; s < want.norms.size(); ++s)
    EXPECT_NEAR(got.norms[s], want.norms[s], 1e-5) << what << " step " << s;
  for (const auto& [name, st] : want.state)
    for (const auto& [key, t] : st)
      EXPECT_LT(mpitest::max_abs_diff(got.state.at(name).at(key), t), tol) << what << " " << name << "/" << key;
}

}  // namespace

TEST(Zero1, DataParallelAndZero1MatchSingleRank) {
  auto self = mpitest::self_groups();
  auto groups = mpitest::cpu_groups(1, 1);
  const auto want = train(self, false, true, 4, adam());
  // Micro-batch sums vs one big batch differ only by fp32 rounding.
  expect_same(train(groups, false, false, 4, adam()), want, 2e-6, "DP");
  expect_same(train(groups, true, false, 4, adam()), want, 2e-6, "ZeRO-1");
  expect_same(train(groups, true, false, 4, adam(), torch::kFloat32, true), want, 2e-6,
              "ZeRO-1, parameter all-gather overlapped");
}

TEST(Zero1, SgdMatchesSingleRank) {
  auto o = adam();
  o.kind = "sgd";
  o.lr = 0.1;
  o.sgd_momentum = 0.9;
  auto self = mpitest::self_groups();
  auto groups = mpitest::cpu_groups(1, 1);
  const auto want = train(self, false, true, 3, o);
  expect_same(train(groups, true, false, 3, o), want, 2e-6, "ZeRO-1 sgd");
}

TEST(Zero1, ParametersIdenticalOnEveryDPRankInBf16) {
  auto groups = mpitest::cpu_groups(1, 1);
  const auto got = train(groups, true, false, 2, adam(), torch::kBFloat16);
  for (const auto& p : got.params) {
    auto mine = p.to(torch::kFloat32).contiguous();
    auto first = mine.clone();
    groups.dp->broadcast(first, 0);
    EXPECT_TRUE(mpitest::all_ranks(torch::equal(mine, first)));
  }
}

TEST(Zero1, StateDictLoadsAcrossShardings) {
  // State saved by the single-rank run loads into ZeRO-1 shards, and training continues as the reference does.
  auto self = mpitest::self_groups();
  auto groups = mpitest::cpu_groups(1, 1);
  mpitest::TinyModel a, b;
  parallel::DataParallelOptions plain, zero;
  zero.zero1 = true;
  zero.bucket_size_mb = 25.0 * 4 / (1024.0 * 1024.0);
  parallel::DataParallel dpa(a.params, self, plain), dpb(b.params, groups, zero);
  optim::MixedPrecisionOptimizer oa(dpa, self, adam(), nullptr), ob(dpb, groups, adam(), nullptr);
  auto step_with_grads = [](parallel::DataParallel& dp, optim::MixedPrecisionOptimizer& o, int s) {
    o.zero_grad();
    for (size_t i = 0; i < dp.params().size(); ++i) {
      torch::manual_seed(500 + 10 * s + static_cast<int>(i));
      dp.main_grad(i).copy_(torch::randn(dp.params()[i].param.sizes()));
    }
    return o.step();
  };
  step_with_grads(dpa, oa, 0);
  step_with_grads(dpa, oa, 1);
  ob.load_state_dict(oa.state_dict());
  ob.load_scalar_state(oa.scalar_state());
  for (int s = 2; s < 4; ++s) {
    step_with_grads(dpa, oa, s);
    step_with_grads(dpb, ob, s);  // same gradients on every DP rank: their average is the same
  }
  for (size_t i = 0; i < a.params.size(); ++i) EXPECT_LT(mpitest::max_abs_diff(a[i], b[i]), 1e-6) << a.params[i].name;
}
