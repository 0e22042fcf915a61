// Megatron's DynamicGradScaler / ConstantGradScaler rules (reference inventory §7.3 b).
#include "optim/grad_scaler.h"

#include <gtest/gtest.h>

#include "core/error.h"

using namespace megaton;

namespace {
optim::DynamicGradScalerOptions opts(double initial, int window, int hysteresis, double min_scale = 1.0) {
  optim::DynamicGradScalerOptions o;
  o.initial_scale = initial;
  o.growth_interval = window;
  o.hysteresis = hysteresis;
  o.min_scale = min_scale;
  return o;
}
}  // namespace

TEST(OptimGradScaler, GrowsAfterACleanWindow) {
  optim::DynamicGradScaler s(opts(1024, 3, 2));
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 1024);
  s.update(false);
  EXPECT_EQ(s.scale(), 2048);
  EXPECT_EQ(s.growth_tracker(), 0);
}

TEST(OptimGradScaler, HysteresisDelaysBackoffAndIsNotRefilledByOverflows) {
  optim::DynamicGradScaler s(opts(1024, 3, 2));
  s.update(true);  // tracker 2 -> 1: kept
  EXPECT_EQ(s.scale(), 1024);
  s.update(false);  // a clean step does not refill the hysteresis budget...
  EXPECT_EQ(s.hysteresis_tracker(), 1);
  s.update(true);  // ... so the next overflow halves
  EXPECT_EQ(s.scale(), 512);
  s.update(true);  // and every further one
  EXPECT_EQ(s.scale(), 256);
  for (int i = 0; i < 3; ++i) s.update(false);  // a full clean window: doubles and refills
  EXPECT_EQ(s.scale(), 512);
  EXPECT_EQ(s.hysteresis_tracker(), 2);
  s.update(true);
  EXPECT_EQ(s.scale(), 512);
}

TEST(OptimGradScaler, OverflowResetsGrowthTracker) {
  optim::DynamicGradScaler s(opts(8, 3, 1));
  s.update(false);
  s.update(false);
  s.update(true);  // hysteresis 1: halves at once, growth restarts
  EXPECT_EQ(s.scale(), 4);
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 4);
  s.update(false);
  EXPECT_EQ(s.scale(), 8);
}

TEST(OptimGradScaler, FloorsAtMinScale) {
  optim::DynamicGradScaler s(opts(4, 100, 1, 2.0));
  s.update(true);
  EXPECT_EQ(s.scale(), 2);
  s.update(true);
  EXPECT_EQ(s.scale(), 2);
}

TEST(OptimGradScaler, StateRoundTrip) {
  optim::DynamicGradScaler a(opts(1024, 5, 2)), b(opts(1024, 5, 2));
  a.update(true);
  a.update(false);
  a.update(false);
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(b.state_dict(), a.state_dict());
  EXPECT_EQ(b.growth_tracker(), 2);
  EXPECT_EQ(b.hysteresis_tracker(), 1);
  EXPECT_THROW(b.load_state_dict(nlohmann::json{{"scale", 1.0}}), CheckpointError);
}

TEST(OptimGradScaler, FactoryFollowsMegatron) {
  optim::PrecisionOptions p;
  EXPECT_EQ(optim::make_grad_scaler(p), nullptr);  // fp32
  p.bf16 = true;
  EXPECT_EQ(optim::make_grad_scaler(p), nullptr);
  p.loss_scale = 128;
  auto c = optim::make_grad_scaler(p);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->scale(), 128);
  c->update(true);
  EXPECT_EQ(c->scale(), 128);
  p = optim::PrecisionOptions{};
  p.fp16 = true;
  auto d = optim::make_grad_scaler(p);
  ASSERT_NE(dynamic_cast<optim::DynamicGradScaler*>(d.get()), nullptr);
  EXPECT_EQ(d->scale(), 4294967296.0);
}
