// AnnealingLR against values computed by hand from Megatron's formulas (reference inventory §7.1).
#include "optim/lr_scheduler.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "optim/lr_schedule_options.h"

using namespace megaton;
using optim::AnnealingLR;
using optim::LrSchedulerOptions;

namespace {

LrSchedulerOptions base(const std::string& style) {
  LrSchedulerOptions o;
  o.max_lr = 0.1;
  o.min_lr = 0.01;
  o.warmup_steps = 100;
  o.decay_steps = 1000;
  o.decay_style = style;
  return o;
}

double lr_at(LrSchedulerOptions o, int64_t n) {
  AnnealingLR s(std::move(o));
  return s.step(n);
}

}  // namespace

TEST(OptimLr, WarmupIsLinearAndStartsAtZero) {
  AnnealingLR s(base("linear"));
  EXPECT_DOUBLE_EQ(s.lr(), 0.0);  // the first optimizer step runs at lr 0
  EXPECT_DOUBLE_EQ(s.step(25), 0.025);
  EXPECT_DOUBLE_EQ(s.step(25), 0.05);
  EXPECT_DOUBLE_EQ(s.step(50), 0.1);  // n == W: still the warmup branch, max_lr
}

TEST(OptimLr, LinearDecayThenMinLr) {
  EXPECT_NEAR(lr_at(base("linear"), 550), 0.055, 1e-12);   // ratio 450/900
  EXPECT_NEAR(lr_at(base("linear"), 325), 0.0775, 1e-12);  // ratio 0.25
  EXPECT_NEAR(lr_at(base("linear"), 1000), 0.01, 1e-12);   // ratio 1
  EXPECT_DOUBLE_EQ(lr_at(base("linear"), 1001), 0.01);     // past D: min_lr
  EXPECT_DOUBLE_EQ(lr_at(base("linear"), 5000), 0.01);
}

TEST(OptimLr, CosineDecay) {
  EXPECT_NEAR(lr_at(base("cosine"), 325), 0.08681980515339463, 1e-12);  // 0.01 + 0.5*(cos(pi/4)+1)*0.09
  EXPECT_NEAR(lr_at(base("cosine"), 550), 0.055, 1e-12);
  EXPECT_NEAR(lr_at(base("cosine"), 775), 0.023180194846605363, 1e-12);
  EXPECT_NEAR(lr_at(base("cosine"), 1000), 0.01, 1e-12);
}

TEST(OptimLr, ConstantAfterWarmup) {
  EXPECT_DOUBLE_EQ(lr_at(base("constant"), 50), 0.05);
  EXPECT_DOUBLE_EQ(lr_at(base("constant"), 500), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(base("constant"), 5000), 0.1);
}

TEST(OptimLr, NoWarmupStartsAtMax) {
  auto o = base("linear");
  o.warmup_steps = 0;
  AnnealingLR s(o);
  EXPECT_DOUBLE_EQ(s.lr(), 0.1);
  EXPECT_NEAR(s.step(500), 0.055, 1e-12);
}

TEST(OptimLr, TokenBasedDecay) {
  LrSchedulerOptions o;
  o.max_lr = 1.0;
  o.min_lr = 0.0;
  o.warmup_steps = 10;
  o.decay_steps = 100;
  o.decay_tokens = 1000;
  AnnealingLR s(o);
  EXPECT_DOUBLE_EQ(s.step(5, 100), 0.5);
  EXPECT_DOUBLE_EQ(s.step(5, 200), 1.0);   // n == W: warmup_tokens = 200 is recorded
  EXPECT_DOUBLE_EQ(s.step(10, 600), 0.5);  // (600 - 200) / (1000 - 200)
  EXPECT_DOUBLE_EQ(s.step(10, 1100), 0.0);
  EXPECT_EQ(s.state_dict().at("warmup_tokens").get<int64_t>(), 200);
}

TEST(OptimLr, RejectsBadSpans) {
  auto o = base("linear");
  o.warmup_steps = 1000;
  EXPECT_THROW(AnnealingLR{o}, UsageError);
  o = base("linear");
  o.decay_steps = 0;
  EXPECT_THROW(AnnealingLR{o}, UsageError);
  o = base("linear");
  o.min_lr = 0.2;
  EXPECT_THROW(AnnealingLR{o}, UsageError);
  o = base("exponential");
  EXPECT_THROW(AnnealingLR{o}, UsageError);
}

TEST(OptimLr, OptionsFromIterationAndSampleModes) {
  optim::LrScheduleOptions t;
  t.lr = 0.1;
  t.lr_warmup_iters = 5;
  auto o = t.scheduler(/*train_iters=*/100, /*train_samples=*/0, /*global_batch=*/8);
  EXPECT_EQ(o.decay_steps, 800);
  EXPECT_DOUBLE_EQ(o.warmup_steps, 40);
  t.lr_warmup_iters = 0;
  t.lr_warmup_fraction = 0.1;
  t.lr_decay_iters = 50;
  o = t.scheduler(100, 0, 8);
  EXPECT_EQ(o.decay_steps, 400);
  EXPECT_DOUBLE_EQ(o.warmup_steps, 40);
  optim::LrScheduleOptions s;
  s.lr = 0.1;
  s.lr_warmup_samples = 30;
  o = s.scheduler(0, /*train_samples=*/1000, 8);
  EXPECT_EQ(o.decay_steps, 1000);
  EXPECT_DOUBLE_EQ(o.warmup_steps, 30);
  s.lr_decay_samples = 600;
  s.lr_warmup_samples = 0;
  s.lr_warmup_fraction = 0.25;
  o = s.scheduler(0, 1000, 8);
  EXPECT_EQ(o.decay_steps, 600);
  EXPECT_DOUBLE_EQ(o.warmup_steps, 150);
  optim::LrScheduleOptions none;
  EXPECT_THROW(none.scheduler(100, 0, 8), UsageError);  // no --lr
}

TEST(OptimLr, StateRoundTripRestoresPosition) {
  AnnealingLR a(base("cosine"));
  a.step(300);
  a.step(37);
  AnnealingLR b(base("cosine"));
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(b.num_steps(), 337);
  EXPECT_DOUBLE_EQ(b.lr(), a.lr());
  EXPECT_DOUBLE_EQ(b.step(100), a.step(100));
}

TEST(OptimLr, CheckpointValuesMustMatchUnlessOverriddenOrTaken) {
  AnnealingLR saved(base("linear"));
  saved.step(550);
  const auto sd = saved.state_dict();
  auto other = base("linear");
  other.max_lr = 0.2;
  {
    AnnealingLR s(other);
    EXPECT_THROW(s.load_state_dict(sd), CheckpointError);
  }
  {
    auto o = other;
    o.override_lr_scheduler = true;  // keep 0.2 from the command line
    AnnealingLR s(o);
    s.load_state_dict(sd);
    EXPECT_NEAR(s.lr(), 0.01 + 0.5 * 0.19, 1e-12);
  }
  {
    auto o = other;
    o.use_checkpoint_lr_scheduler = true;  // take 0.1 from the checkpoint
    AnnealingLR s(o);
    s.load_state_dict(sd);
    EXPECT_NEAR(s.lr(), 0.055, 1e-12);
    EXPECT_DOUBLE_EQ(s.options().max_lr, 0.1);
  }
}

TEST(OptimLr, AcceptsLegacyKeys) {
  nlohmann::json legacy = {{"start_lr", 0.1},  {"min_lr", 0.01},          {"warmup_iter", 100},
                           {"end_iter", 1000}, {"decay_style", "linear"}, {"num_iters", 550}};
  AnnealingLR s(base("linear"));
  s.load_state_dict(legacy);
  EXPECT_NEAR(s.lr(), 0.055, 1e-12);
  EXPECT_THROW(s.load_state_dict(nlohmann::json{{"max_lr", 0.1}}), CheckpointError);
}
