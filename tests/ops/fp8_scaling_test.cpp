// The delayed-scaling recipe against a reference written here: a per-slot window of the last L iterations' amaxes
// (a deque), the scale from the most recent amax or the window's maximum, kept when that amax is 0 or not finite.
// The table's history roll must give the same scales over many iterations, history lengths and margins; its
// checkpoint state round-trips by slot name.
#include "ops/fp8/fp8_scaling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <random>

#include "core/error.h"

using namespace megaton::ops::fp8;

namespace {

struct ReferenceSlot {
  std::deque<float> window;  // the last L finished iterations' amaxes, newest at the back
  float scale = 1.0f;
};

void run_against_reference(int history, const std::string& algo, int margin) {
  Fp8Options o;
  o.format = "hybrid";
  o.amax_history_len = history;
  o.amax_compute_algo = algo;
  o.margin = margin;
  ScalingTable table(o, torch::kCPU);
  const int x = table.slot("layers.0.fc1:input", o.forward_format());
  const int g = table.slot("layers.0.fc1:grad_output", o.backward_format());
  EXPECT_EQ(table.slot("layers.0.fc1:input", o.forward_format()), x);  // the same name, the same slot
  std::vector<ReferenceSlot> ref(2);
  std::mt19937 rng(history * 100 + margin);
  std::uniform_real_distribution<float> u(-8.0f, 8.0f);
  for (int it = 0; it < 40; ++it) {
    for (int s : {x, g}) {
      float amax = 0;
      for (int mb = 0; mb < 3; ++mb) {  // micro-batches: row 0 keeps their maximum
        float a = std::exp2(u(rng));
        if (it % 11 == 5 && s == g) a = INFINITY;  // an overflowing gradient: the scale is kept
        if (it % 13 == 7 && s == x) a = 0.0f;      // an all-zero input: the scale is kept
        table.record_amax(s, torch::tensor(a));
        amax = std::max(amax, a);
      }
      auto& r = ref[static_cast<size_t>(s)];
      r.window.push_back(amax);
      if (static_cast<int>(r.window.size()) > history) r.window.pop_front();
      float used = amax;
      if (algo == "max")
        for (float w : r.window) used = std::max(used, w);
      const Format f = s == x ? o.forward_format() : o.backward_format();
      r.scale = scale_for_amax(used, f, margin, r.scale);
    }
    table.update();
    for (int s : {x, g}) {
      const float want = ref[static_cast<size_t>(s)].scale;
      EXPECT_FLOAT_EQ(table.scale()[s].item<float>(), want) << "iteration " << it << " slot " << s;
      EXPECT_FLOAT_EQ(table.scale_inv()[s].item<float>(), 1.0f / want);
    }
    EXPECT_EQ(table.amax_history()[0].abs().sum().item<float>(), 0.0f) << "row 0 starts each iteration at 0";
  }
}

}  // namespace

TEST(Fp8Scaling, DelayedRecipeMatchesReferenceWindow) {
  for (int history : {1, 2, 3, 16})
    for (const char* algo : {"most_recent", "max"})
      for (int margin : {0, 2}) run_against_reference(history, algo, margin);
}

TEST(Fp8Scaling, ScaleForAmaxUsesTheFormatsMaximumAndMargin) {
  EXPECT_FLOAT_EQ(scale_for_amax(2.0f, Format::kE4M3, 0), 224.0f);
  EXPECT_FLOAT_EQ(scale_for_amax(2.0f, Format::kE5M2, 1), 57344.0f / 4.0f);
  EXPECT_FLOAT_EQ(scale_for_amax(0.0f, Format::kE4M3, 0, 3.0f), 3.0f);
  EXPECT_FLOAT_EQ(scale_for_amax(NAN, Format::kE4M3, 0, 5.0f), 5.0f);
}

TEST(Fp8Scaling, HybridUsesE5M2ForGradientsOnly) {
  Fp8Options o;
  o.format = "hybrid";
  EXPECT_EQ(o.forward_format(), Format::kE4M3);
  EXPECT_EQ(o.backward_format(), Format::kE5M2);
  o.format = "e4m3";
  EXPECT_EQ(o.backward_format(), Format::kE4M3);
}

TEST(Fp8Scaling, BadOptionsNameTheFlag) {
  auto refused = [](auto set, const std::string& flag) {
    Fp8Options o;
    o.format = "e4m3";
    set(o);
    try {
      o.validate();
      ADD_FAILURE() << flag << " accepted";
    } catch (const megaton::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(flag), std::string::npos) << e.what();
    }
  };
  refused([](Fp8Options& o) { o.format = "e5m2"; }, "--fp8-format");
  refused([](Fp8Options& o) { o.recipe = "mxfp8"; }, "--fp8-recipe");
  refused([](Fp8Options& o) { o.amax_compute_algo = "mean"; }, "--fp8-amax-compute-algo");
  refused([](Fp8Options& o) { o.amax_history_len = 0; }, "--fp8-amax-history-len");
  refused([](Fp8Options& o) { o.margin = -1; }, "--fp8-margin");
}

TEST(Fp8Scaling, StateRoundTripsByNameAcrossSlotOrderAndHistoryLength) {
  Fp8Options o;
  o.format = "e4m3";
  o.amax_history_len = 4;
  o.amax_compute_algo = "max";
  ScalingTable a(o, torch::kCPU);
  const int s0 = a.slot("w0", Format::kE4M3), s1 = a.slot("w1", Format::kE4M3);
  for (int it = 0; it < 6; ++it) {
    a.record_amax(s0, torch::tensor(1.0f + it));
    a.record_amax(s1, torch::tensor(10.0f - it));
    a.update();
  }
  a.record_amax(s0, torch::tensor(0.5f));  // an iteration in progress

  ScalingTable b(o, torch::kCPU);  // the same slots, registered in the other order
  b.slot("w1", Format::kE4M3);
  b.slot("w0", Format::kE4M3);
  b.load_state(a.names(), a.state());
  for (const std::string name : {"w0", "w1"}) {
    const int ia = a.slot(name, Format::kE4M3), ib = b.slot(name, Format::kE4M3);
    EXPECT_EQ(b.scale()[ib].item<float>(), a.scale()[ia].item<float>()) << name;
    EXPECT_TRUE(b.amax_history().select(1, ib).equal(a.amax_history().select(1, ia))) << name;
  }
  // The next update is the same in both.
  a.update();
  b.update();
  EXPECT_EQ(b.scale()[b.slot("w0", Format::kE4M3)].item<float>(), a.scale()[s0].item<float>());

  // A shorter history keeps the newest rows.
  o.amax_history_len = 2;
  ScalingTable c(o, torch::kCPU);
  c.slot("w0", Format::kE4M3);
  c.slot("w1", Format::kE4M3);
  c.load_state(a.names(), a.state());
  EXPECT_TRUE(c.amax_history()[1].equal(a.amax_history()[3]));

  // The JSON form (meta/state.json) restores the same, into a table holding a subset of the saved slots.
  ScalingTable e(o, torch::kCPU);
  e.slot("w1", Format::kE4M3);
  e.load_json(a.to_json());
  EXPECT_EQ(e.scale()[0].item<float>(), a.scale()[s1].item<float>());
  EXPECT_TRUE(e.amax_history().select(1, 0).equal(c.amax_history().select(1, 1)));

  // A checkpoint without one of the model's FP8 tensors is refused naming it.
  ScalingTable d(o, torch::kCPU);
  d.slot("w0", Format::kE4M3);
  d.slot("w2", Format::kE4M3);
  EXPECT_THROW(d.load_state(a.names(), a.state()), megaton::CheckpointError);
}
