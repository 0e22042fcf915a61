// The mixed-precision optimizer on one rank against independent references: LibTorch's own AdamW and SGD (with
// clip_grad_norm_), fp16 overflow handling, bf16 master precision, fp32 gradient accumulation, state round trips.
#include "optim/optimizer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"
#include "ops/linear.h"
#include "optim/optim_test_support.h"
#include "parallel/data/data_parallel.h"
#include "parallel/data/main_grads.h"

using namespace megaton;
using optimtest::TinyModel;

namespace {

struct Batch {
  torch::Tensor x, y;
};

std::vector<Batch> make_batches(int n, uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<Batch> b;
  for (int i = 0; i < n; ++i) b.push_back({torch::randn({5, 4}), torch::randn({5, 3})});
  return b;
}

parallel::DataParallelOptions small_buckets() {
  parallel::DataParallelOptions o;
  o.bucket_size_mb = 40.0 * 4 / (1024.0 * 1024.0);  // 40 fp32 elements: several buckets for TinyModel
  return o;
}

optim::OptimizerOptions adam_options(double clip) {
  optim::OptimizerOptions o;
  o.kind = "adam";
  o.lr = 0.05;
  o.weight_decay = 0.1;
  o.adam_beta1 = 0.8;
  o.adam_beta2 = 0.95;
  o.adam_eps = 1e-6;
  o.clip_grad = clip;
  return o;
}

// Runs `steps` steps of our optimizer and of a LibTorch reference on identical copies of TinyModel.
void compare_with_libtorch(const optim::OptimizerOptions& oo, int steps) {
  auto groups = optimtest::self_groups();
  TinyModel ours, ref;
  parallel::DataParallel dp(ours.params, groups, small_buckets());
  ASSERT_GT(dp.layout().buckets().size(), 1u);
  optim::MixedPrecisionOptimizer opt(dp, groups, oo, nullptr);

  std::vector<torch::Tensor> decay, no_decay, all;
  for (const auto& p : ref.params) {
    (p.no_weight_decay ? no_decay : decay).push_back(p.param);
    all.push_back(p.param);
  }
  std::unique_ptr<torch::optim::Optimizer> reference;
  if (oo.kind == "adam") {
    auto o = [&](double wd) {
      return std::make_unique<torch::optim::AdamWOptions>(
          torch::optim::AdamWOptions(oo.lr).betas({oo.adam_beta1, oo.adam_beta2}).eps(oo.adam_eps).weight_decay(wd));
    };
    reference = std::make_unique<torch::optim::AdamW>(
        std::vector<torch::optim::OptimizerParamGroup>{torch::optim::OptimizerParamGroup(decay, o(oo.weight_decay)),
                                                       torch::optim::OptimizerParamGroup(no_decay, o(0.0))});
  } else {
    auto o = [&](double wd) {
      return std::make_unique<torch::optim::SGDOptions>(
          torch::optim::SGDOptions(oo.lr).momentum(oo.sgd_momentum).weight_decay(wd));
    };
    reference = std::make_unique<torch::optim::SGD>(
        std::vector<torch::optim::OptimizerParamGroup>{torch::optim::OptimizerParamGroup(decay, o(oo.weight_decay)),
                                                       torch::optim::OptimizerParamGroup(no_decay, o(0.0))},
        torch::optim::SGDOptions(oo.lr));
  }
  const auto batches = make_batches(steps, 11);
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    ours.loss(batches[s].x, batches[s].y).backward();
    const auto r = opt.step();
    ASSERT_TRUE(r.updated);

    reference->zero_grad();
    ref.loss(batches[s].x, batches[s].y).backward();
    double ref_norm = 0;
    for (const auto& p : all) ref_norm += p.grad().pow(2).sum().item<double>();
    ref_norm = std::sqrt(ref_norm);
    if (oo.clip_grad > 0) {
      torch::nn::utils::clip_grad_norm_(all, oo.clip_grad);
      ASSERT_TRUE(r.grad_norm.has_value());
      EXPECT_NEAR(*r.grad_norm, ref_norm, 1e-5 * ref_norm) << "step " << s;
    } else {
      EXPECT_FALSE(r.grad_norm.has_value());
    }
    reference->step();
    for (size_t i = 0; i < all.size(); ++i)
      EXPECT_TRUE(torch::allclose(ours[i], ref[i], 1e-5, 1e-6)) << ours.params[i].name << " step " << s << "\n"
                                                                << (ours[i] - ref[i]).abs().max();
  }
  EXPECT_EQ(opt.step_count(), steps);
}

}  // namespace

TEST(OptimAdam, MatchesLibtorchAdamWWithWeightDecayGroups) {
  compare_with_libtorch(adam_options(0.0), 4);
}

TEST(OptimAdam, MatchesLibtorchAdamWWithGradClipping) {
  compare_with_libtorch(adam_options(0.05), 4);
}

TEST(OptimSgd, MatchesLibtorchSgdWithMomentumAndL2) {
  optim::OptimizerOptions o;
  o.kind = "sgd";
  o.lr = 0.1;
  o.weight_decay = 0.05;
  o.sgd_momentum = 0.9;
  o.clip_grad = 0.0;
  compare_with_libtorch(o, 4);
}

TEST(OptimSgd, ClippingScalesTheUpdateByGlobalNorm) {
  auto groups = optimtest::self_groups();
  TinyModel m;
  parallel::DataParallel dp(m.params, groups, {});
  optim::OptimizerOptions o;
  o.kind = "sgd";
  o.lr = 1.0;
  o.weight_decay = 0.0;
  o.sgd_momentum = 0.0;
  o.clip_grad = 0.5;
  optim::MixedPrecisionOptimizer opt(dp, groups, o, nullptr);
  const auto before = m.snapshot();
  opt.zero_grad();
  // Hand-set gradients with a known norm: every element 0.1, so norm = 0.1 * sqrt(numel).
  int64_t numel = 0;
  for (size_t i = 0; i < m.params.size(); ++i) {
    dp.main_grad(i).fill_(0.1);
    numel += m[i].numel();
  }
  const auto r = opt.step();
  const double norm = 0.1 * std::sqrt(static_cast<double>(numel));
  ASSERT_TRUE(r.updated && r.grad_norm);
  EXPECT_NEAR(*r.grad_norm, norm, 1e-6);
  const double expected_delta = -0.1 * 0.5 / (norm + 1e-6);
  for (size_t i = 0; i < m.params.size(); ++i)
    EXPECT_TRUE(torch::allclose(m[i] - before[i], torch::full_like(before[i], expected_delta), 1e-5, 1e-7));
}

TEST(OptimFp16, OverflowSkipsTheStepAndBacksOffPerHysteresis) {
  auto groups = optimtest::self_groups();
  TinyModel m(torch::kFloat16);
  parallel::DataParallel dp(m.params, groups, {});
  optim::DynamicGradScalerOptions so;
  so.initial_scale = 1024;
  so.hysteresis = 2;
  so.growth_interval = 1000;
  optim::MixedPrecisionOptimizer opt(dp, groups, adam_options(1.0), std::make_unique<optim::DynamicGradScaler>(so));
  const auto batches = make_batches(4, 3);
  auto scaled_backward = [&](const Batch& b) {
    opt.zero_grad();
    (m.loss(b.x, b.y) * opt.loss_scale()).backward();
  };
  const auto before = m.snapshot();
  // 1st overflow: skipped, hysteresis 2 -> 1, scale kept.
  scaled_backward(batches[0]);
  dp.main_grad(1)[0][0] = std::numeric_limits<float>::infinity();
  auto r = opt.step();
  EXPECT_FALSE(r.updated);
  EXPECT_FALSE(r.grad_norm.has_value());
  EXPECT_EQ(opt.skipped_steps(), 1);
  EXPECT_EQ(opt.loss_scale(), 1024.0);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(torch::equal(m[i], before[i])) << m.params[i].name;
  // 2nd overflow (NaN this time): skipped, hysteresis exhausted -> scale halves.
  scaled_backward(batches[1]);
  dp.main_grad(3)[1][2] = std::numeric_limits<float>::quiet_NaN();
  r = opt.step();
  EXPECT_FALSE(r.updated);
  EXPECT_EQ(opt.skipped_steps(), 2);
  EXPECT_EQ(opt.loss_scale(), 512.0);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(torch::equal(m[i], before[i]));
  EXPECT_EQ(opt.step_count(), 0);
  // A clean step updates and does not change the scale.
  scaled_backward(batches[2]);
  r = opt.step();
  EXPECT_TRUE(r.updated);
  EXPECT_EQ(opt.loss_scale(), 512.0);
  EXPECT_FALSE(torch::equal(m[1], before[1]));
  EXPECT_EQ(opt.step_count(), 1);
}

TEST(OptimFp16, UnscaledUpdateMatchesFp32) {
  // SGD without momentum: the fp16 run with loss scale 2^10 must apply (grad_fp16 / 2^10) to fp32 masters.
  auto groups16 = optimtest::self_groups(), groups32 = optimtest::self_groups();
  TinyModel m16(torch::kFloat16), m32(torch::kFloat32);
  for (size_t i = 0; i < m32.params.size(); ++i) {  // same starting point: the fp16-rounded values
    torch::NoGradGuard g;
    m32[i].copy_(m16[i].to(torch::kFloat32));
  }
  parallel::DataParallel dp16(m16.params, groups16, {}), dp32(m32.params, groups32, {});
  optim::OptimizerOptions o;
  o.kind = "sgd";
  o.lr = 0.5;
  o.sgd_momentum = 0.0;
  o.weight_decay = 0.0;
  o.clip_grad = 0.0;
  optim::MixedPrecisionOptimizer opt16(dp16, groups16, o, std::make_unique<optim::ConstantGradScaler>(1024.0));
  optim::MixedPrecisionOptimizer opt32(dp32, groups32, o, nullptr);
  const auto b = make_batches(1, 5)[0];
  opt16.zero_grad();
  (m16.loss(b.x, b.y) * opt16.loss_scale()).backward();
  std::vector<torch::Tensor> g16;
  for (size_t i = 0; i < m16.params.size(); ++i) g16.push_back(dp16.main_grad(i).clone() / 1024.0);
  const auto masters_before = opt16.master_shard().clone();
  ASSERT_TRUE(opt16.step().updated);
  // master_new = master_old - lr * grad / scale, exactly what fp32 SGD does with those gradients.
  opt32.zero_grad();
  for (size_t i = 0; i < m32.params.size(); ++i) dp32.main_grad(i).copy_(g16[i]);
  ASSERT_TRUE(opt32.step().updated);
  for (size_t i = 0; i < m16.params.size(); ++i) {
    EXPECT_TRUE(torch::allclose(m16[i].to(torch::kFloat32), m32[i].to(torch::kFloat16).to(torch::kFloat32)))
        << m16.params[i].name;
  }
  EXPECT_FALSE(torch::equal(opt16.master_shard(), masters_before));
}

TEST(OptimBf16, MastersKeepUpdatesSmallerThanBf16Resolution) {
  auto groups = optimtest::self_groups();
  parallel::ParamList params(1);
  params[0].name = "w";
  params[0].param = torch::ones({16}, torch::kBFloat16).set_requires_grad(true);
  parallel::DataParallel dp(params, groups, {});
  optim::OptimizerOptions o;
  o.kind = "sgd";
  o.lr = 1e-4;  // bf16 spacing at 1.0 is 2^-7 ~ 0.0078: one update is far below it
  o.sgd_momentum = 0.0;
  o.weight_decay = 0.0;
  o.clip_grad = 0.0;
  optim::MixedPrecisionOptimizer opt(dp, groups, o, nullptr);
  for (int s = 0; s < 10; ++s) {
    opt.zero_grad();
    dp.main_grad(0).fill_(1.0);
    ASSERT_TRUE(opt.step().updated);
  }
  EXPECT_TRUE(torch::equal(params[0].param, torch::ones({16}, torch::kBFloat16)));  // rounded back to 1.0
  EXPECT_NEAR(opt.master_shard()[0].item<double>(), 1.0 - 10 * 1e-4, 1e-6);         // the fp32 master moved
  for (int s = 0; s < 90; ++s) {  // after 100 steps the master is 0.99, whose bf16 rounding is below 1
    opt.zero_grad();
    dp.main_grad(0).fill_(1.0);
    opt.step();
  }
  EXPECT_LT(params[0].param[0].item<float>(), 1.0f);
}

TEST(OptimMainGrads, AccumulateInFp32AcrossMicroBatchesAndDropModelGrads) {
  auto groups = optimtest::self_groups();
  TinyModel m(torch::kBFloat16);
  parallel::DataParallel dp(m.params, groups, small_buckets());
  const auto batches = make_batches(3, 9);
  dp.zero_grad();
  std::vector<torch::Tensor> expected;
  for (const auto& p : m.params) expected.push_back(torch::zeros(p.param.sizes()));
  for (int mb = 0; mb < 3; ++mb) {
    dp.set_last_microbatch(mb == 2);
    // The same micro-batch on a detached copy gives the bf16 gradients the hooks receive.
    TinyModel copy(torch::kBFloat16);
    for (size_t i = 0; i < m.params.size(); ++i) {
      torch::NoGradGuard g;
      copy[i].copy_(m[i]);
    }
    copy.loss(batches[mb].x, batches[mb].y).backward();
    for (size_t i = 0; i < m.params.size(); ++i) expected[i] += copy[i].grad().to(torch::kFloat32);
    m.loss(batches[mb].x, batches[mb].y).backward();
    for (size_t i = 0; i < m.params.size(); ++i) EXPECT_FALSE(m[i].grad().defined()) << m.params[i].name;
    EXPECT_EQ(dp.buckets_started(), mb == 2 ? static_cast<int>(dp.layout().buckets().size()) : 0);
  }
  for (size_t i = 0; i < m.params.size(); ++i) {
    EXPECT_EQ(dp.main_grad(i).scalar_type(), torch::kFloat32);
    EXPECT_TRUE(torch::allclose(dp.main_grad(i), expected[i], 1e-6, 1e-7)) << m.params[i].name;
  }
}

// Gradient accumulation fusion's first write, against DataParallel without it: fc1 and fc2 through ops::linear with a
// MainGrads table attached. zero_grad leaves their main grads holding the last iteration's values (and zeroes the
// rest); each iteration's first micro-batch overwrites them, the second adds; the main grads equal the reference's
// every iteration.
TEST(OptimMainGrads, FirstWriteOverwritesWhatZeroGradLeft) {
  auto groups = optimtest::self_groups();
  TinyModel ref, fused;
  parallel::DataParallel dp_ref(ref.params, groups, small_buckets());
  parallel::DataParallel dp(fused.params, groups, small_buckets());
  parallel::MainGrads table;
  table.bind(dp.param_buffer(), dp.grad_buffer());
  dp.attach(table);
  auto fused_loss = [&](const Batch& b) {  // TinyModel::loss with fc1 and fc2 through ops::linear
    torch::Tensor h = torch::tanh(ops::linear(b.x * fused[0], fused[1], fused[2], table.of(fused[1])));
    return (ops::linear(h, fused[3], fused[4], table.of(fused[3])) - b.y).pow(2).mean();
  };
  for (int it = 0; it < 3; ++it) {
    const auto batches = make_batches(2, 40 + it);
    dp_ref.zero_grad();
    dp.zero_grad();
    if (it > 0) {
      EXPECT_GT(dp.main_grad(1).abs().sum().item<double>(), 0) << "a registered main grad was zeroed";
      EXPECT_EQ(dp.main_grad(2).abs().sum().item<double>(), 0) << "an unregistered main grad was not zeroed";
    }
    for (int mb = 0; mb < 2; ++mb) {
      dp_ref.set_last_microbatch(mb == 1);
      dp.set_last_microbatch(mb == 1);
      ref.loss(batches[mb].x, batches[mb].y).backward();
      fused_loss(batches[mb]).backward();
    }
    dp_ref.finish_grad_sync();
    dp.finish_grad_sync();
    for (size_t i = 0; i < ref.params.size(); ++i)
      EXPECT_TRUE(torch::allclose(dp.main_grad(i), dp_ref.main_grad(i), 1e-5, 1e-6))
          << ref.params[i].name << ", iteration " << it;
  }
}

// A registered main grad that does not get its first write from a GEMM: fc1's gradient comes through autograd and
// DataParallel's hook (it is zeroed before the hook adds), fc2's weight gets none (zeroed by finish_grad_sync).
TEST(OptimMainGrads, RegisteredMainGradsWithoutAFirstWriteAreZeroedFirst) {
  auto groups = optimtest::self_groups();
  TinyModel m, copy;
  parallel::DataParallel dp(m.params, groups, small_buckets());
  parallel::MainGrads table;
  table.bind(dp.param_buffer(), dp.grad_buffer());
  dp.attach(table);
  table.of(m[1]);
  table.of(m[3]);
  m[3].requires_grad_(false);
  copy[3].requires_grad_(false);
  const auto b = make_batches(1, 5)[0];
  copy.loss(b.x, b.y).backward();
  for (int it = 0; it < 2; ++it) {
    dp.zero_grad();
    dp.main_grad(1).fill_(7.0f);  // what an earlier iteration may have left there
    dp.main_grad(3).fill_(7.0f);
    m.loss(b.x, b.y).backward();
    dp.finish_grad_sync();
    EXPECT_TRUE(torch::allclose(dp.main_grad(1), copy[1].grad(), 1e-6, 1e-7)) << "iteration " << it;
    EXPECT_EQ(dp.main_grad(3).abs().sum().item<float>(), 0.0f) << "iteration " << it;
  }
}

TEST(OptimMainGrads, GradientAfterItsBucketWasReducedIsAnError) {
  auto groups = optimtest::self_groups();
  TinyModel m;
  parallel::DataParallel dp(m.params, groups, {});
  const auto b = make_batches(1, 2)[0];
  dp.zero_grad();
  m.loss(b.x, b.y).backward();  // last_microbatch defaults to true: buckets reduced
  EXPECT_ANY_THROW(m.loss(b.x, b.y).backward());
}

TEST(OptimZeros, CountsZeroGradientElements) {
  auto groups = optimtest::self_groups();
  TinyModel m;
  parallel::DataParallel dp(m.params, groups, small_buckets());
  auto o = adam_options(1.0);
  o.log_num_zeros_in_grad = true;
  optim::MixedPrecisionOptimizer opt(dp, groups, o, nullptr);
  opt.zero_grad();
  int64_t nonzero = 0;
  for (size_t i = 0; i < m.params.size(); ++i) {
    auto g = dp.main_grad(i).view({-1});
    for (int64_t k = 0; k < g.numel(); k += 3, ++nonzero) g[k] = 0.5;
  }
  int64_t total = 0;
  for (const auto& p : m.params) total += p.param.numel();
  const auto r = opt.step();
  ASSERT_TRUE(r.num_zeros.has_value());
  EXPECT_EQ(*r.num_zeros, total - nonzero);
  // A step the trainer will not log counts nothing (and updates the same: the count only reads the gradients).
  opt.zero_grad();
  for (size_t i = 0; i < m.params.size(); ++i) dp.main_grad(i).view({-1}).fill_(0.25);
  const auto quiet = opt.step(/*want_zero_count=*/false);
  EXPECT_TRUE(quiet.updated);
  EXPECT_FALSE(quiet.num_zeros.has_value());
}

TEST(OptimState, RoundTripContinuesIdentically) {
  const auto batches = make_batches(5, 21);
  auto groups_a = optimtest::self_groups(), groups_b = optimtest::self_groups();
  TinyModel a(torch::kBFloat16), b(torch::kBFloat16, /*seed=*/99);
  parallel::DataParallel dpa(a.params, groups_a, small_buckets());
  parallel::DataParallel dpb(b.params, groups_b, {});  // another bucket layout: the state is per parameter
  optim::DynamicGradScalerOptions so;
  so.initial_scale = 256;
  optim::MixedPrecisionOptimizer oa(dpa, groups_a, adam_options(1.0), std::make_unique<optim::DynamicGradScaler>(so));
  optim::MixedPrecisionOptimizer ob(dpb, groups_b, adam_options(1.0), std::make_unique<optim::DynamicGradScaler>(so));
  auto train = [&](TinyModel& m, optim::MixedPrecisionOptimizer& o, const Batch& bt) {
    o.zero_grad();
    (m.loss(bt.x, bt.y) * o.loss_scale()).backward();
    return o.step();
  };
  for (int s = 0; s < 3; ++s) train(a, oa, batches[s]);
  auto state = oa.state_dict();
  ASSERT_EQ(state.size(), a.params.size());
  EXPECT_EQ(state.at("fc1.weight").at("exp_avg").sizes(), a[1].sizes());
  ob.load_state_dict(state);
  ob.load_scalar_state(oa.scalar_state());
  EXPECT_EQ(ob.step_count(), 3);
  for (size_t i = 0; i < a.params.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "weights after load";
  for (int s = 3; s < 5; ++s) {
    train(a, oa, batches[s]);
    train(b, ob, batches[s]);
  }
  for (size_t i = 0; i < a.params.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << a.params[i].name;
  EXPECT_EQ(oa.scalar_state(), ob.scalar_state());
}

TEST(OptimState, RejectsMissingOrMisshapenEntries) {
  auto groups = optimtest::self_groups();
  TinyModel m;
  parallel::DataParallel dp(m.params, groups, {});
  optim::MixedPrecisionOptimizer opt(dp, groups, adam_options(1.0), nullptr);
  auto state = opt.state_dict();
  auto bad = state;
  bad["fc2.weight"]["exp_avg"] = torch::zeros({8, 3});
  EXPECT_THROW(opt.load_state_dict(bad), CheckpointError);
  bad = state;
  bad.erase("fc1.bias");
  EXPECT_THROW(opt.load_state_dict(bad), CheckpointError);
  EXPECT_THROW(opt.load_scalar_state(nlohmann::json{{"optimizer", "sgd"}, {"step", 1}}), CheckpointError);
}

TEST(OptimConfig, RejectsUnknownOptimizerAndMixedDtypes) {
  auto groups = optimtest::self_groups();
  TinyModel m;
  parallel::DataParallel dp(m.params, groups, {});
  auto o = adam_options(1.0);
  o.kind = "lamb";
  EXPECT_THROW(optim::MixedPrecisionOptimizer(dp, groups, o, nullptr), UsageError);
  TinyModel mixed;
  mixed.params[2].param = mixed.params[2].param.detach().to(torch::kBFloat16).set_requires_grad(true);
  EXPECT_THROW(parallel::DataParallel(mixed.params, groups, {}), UsageError);
}
