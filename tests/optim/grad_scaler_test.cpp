// Megatron's DynamicGradScaler / ConstantGradScaler rules (reference inventory §7.3 b).
#include "optim/grad_scaler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

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

namespace {
// DeepSpeed's DynamicLossScaler.update_scale (deepspeed/runtime/fp16/loss_scaler.py), which the fork's fp16 runs use
// under --deepspeed, written from its description: hysteresis counts down to 1 and then every overflow shrinks; a
// growth when (iteration - last overflow iteration) is a multiple of the window, refilling the hysteresis.
struct DeepSpeedScaler {
  double cur_scale, min_scale;
  int scale_window, delayed_shift, cur_hysteresis;
  int64_t cur_iter = 0, last_overflow_iter = -1;
  void update_scale(bool overflow) {
    if (overflow) {
      if (delayed_shift == 1 || cur_hysteresis == 1)
        cur_scale = std::max(cur_scale / 2.0, min_scale);
      else
        cur_hysteresis -= 1;
      last_overflow_iter = cur_iter;
    } else if ((cur_iter - last_overflow_iter) % scale_window == 0) {
      cur_hysteresis = delayed_shift;
      cur_scale *= 2.0;
    }
    ++cur_iter;
  }
};
}  // namespace

TEST(GradScaler, DynamicFollowsDeepSpeedsDynamicLossScaler) {
  // Random overflow patterns (bursts and isolated ones) over 4000 iterations, for several windows and hysteresis
  // budgets: the scale after every iteration equals DeepSpeed's (min_loss_scale reached included).
  uint64_t state = 12345;
  auto next = [&] { return (state = state * 6364136223846793005ull + 1442695040888963407ull) >> 33; };
  for (int window : {1, 3, 16, 500}) {
    for (int hysteresis : {1, 2, 5}) {
      optim::DynamicGradScaler ours(opts(65536.0, window, hysteresis, 4.0));
      DeepSpeedScaler ds{65536.0, 4.0, window, hysteresis, hysteresis};
      int burst = 0;
      for (int it = 0; it < 4000; ++it) {
        if (burst == 0 && next() % 97 == 0) burst = 1 + static_cast<int>(next() % 20);
        const bool overflow = burst > 0 || next() % 251 == 0;
        if (burst > 0) --burst;
        ours.update(overflow);
        ds.update_scale(overflow);
        ASSERT_EQ(ours.scale(), ds.cur_scale) << "window " << window << " hysteresis " << hysteresis << " it " << it;
      }
    }
  }
}
