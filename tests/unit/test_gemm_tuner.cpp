// ops::GemmTuner on a fake device timeline (CPU; the tuner is off unless set on): the candidates take a shape's calls
// in turn, alternating direction, until each has kSamples; the lowest median is kept, the baseline unless another is
// kMargin faster; a steady drift of the clock favours no candidate; failed candidates; the off switch; the log lines.
// KernelsGemmTuner.*: the tuned cuBLASLt weight-gradient GEMM against the fp32 product on the GPU, on every call of its
// trial, overwriting and adding (skipped without CUDA).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ops/gemm_tuner.h"
#ifdef MEGATON_HAVE_CUDA
#include "ops/cublaslt_gemm.h"
#include "ops/linear.h"
#endif

using namespace megaton;

namespace {

// A point on a fake device timeline, in seconds.
class FakeMark : public DeviceMark {
 public:
  explicit FakeMark(double t) : t_(t) {}
  double seconds_since(const DeviceMark& earlier) const override {
    return t_ - dynamic_cast<const FakeMark&>(earlier).t_;
  }

 private:
  double t_;
};

// Calls key's GEMM until the tuner decides (at most `calls` times), as ops/cublaslt_gemm_cuda.cpp does: each timed turn
// takes seconds(candidate, call index) of device time, or fails for a candidate in `fails`. Returns the candidates
// run, in order.
std::vector<int> drive(ops::GemmTuner& tuner, const std::vector<int64_t>& key, int baseline, int last,
                       const std::function<double(int, int)>& seconds, const std::set<int>& fails = {},
                       int calls = 1000, const std::string& label = {}) {
  std::vector<int> ran;
  double now = 0;
  for (int i = 0; i < calls && !tuner.decided(key); ++i) {
    const ops::GemmTuner::Turn turn = tuner.next(key, baseline, last, label);
    if (turn.final) break;
    EXPECT_TRUE(turn.timed);
    if (fails.count(turn.candidate) != 0) {
      tuner.failed(key, turn.candidate);
      continue;
    }
    auto start = std::make_unique<FakeMark>(now);
    now += seconds(turn.candidate, i);
    tuner.add_sample(key, turn.candidate, std::move(start), std::make_unique<FakeMark>(now));
    ran.push_back(turn.candidate);
  }
  return ran;
}

int count(const std::vector<int>& v, int c) {
  return static_cast<int>(std::count(v.begin(), v.end(), c));
}

}  // namespace

TEST(GemmTuner, CandidatesTakeTurnsAndTheLowestMedianIsKept) {
  ops::GemmTuner tuner;
  tuner.set_enabled(true);
  int outlier = 0;  // candidate 2's first call is very fast: the median ignores it
  const std::vector<int> ran = drive(tuner, {1, 2, 3}, 0, 3, [&](int c, int) {
    if (c == 2 && outlier++ == 0) return 0.01;
    return c == 0 ? 1.0 : (c == 1 ? 0.5 : 0.7);
  });
  ASSERT_GE(ran.size(), 6u);
  EXPECT_EQ(std::vector<int>(ran.begin(), ran.begin() + 6), (std::vector<int>{0, 1, 2, 2, 1, 0}));  // alternating
  for (int c = 0; c < 3; ++c) EXPECT_EQ(count(ran, c), ops::GemmTuner::kSamples) << c;
  ASSERT_TRUE(tuner.decided({1, 2, 3}));
  EXPECT_EQ(tuner.choice({1, 2, 3}), 1);
  const ops::GemmTuner::Turn after = tuner.next({1, 2, 3}, 0, 3);  // kept, no more timing
  EXPECT_EQ(after.candidate, 1);
  EXPECT_FALSE(after.timed);
  EXPECT_TRUE(after.final);
  EXPECT_EQ(tuner.trials_in_progress(), 0u);
  drive(tuner, {1, 2, 4}, 0, 3, [](int c, int) { return c == 0 ? 0.5 : 1.0; });  // another key: timed anew
  EXPECT_EQ(tuner.choice({1, 2, 4}), 0);
  EXPECT_EQ(tuner.choices().size(), 2u);
}

TEST(GemmTuner, SteadyClockDriftFavoursNoCandidate) {
  // three equally fast candidates timed while the clock rises (each call 0.03 s shorter than the one before): timed
  // one after another the last would look faster than the baseline by far more than the margin and replace it
  ops::GemmTuner tuner;
  tuner.set_enabled(true);
  drive(tuner, {1}, 0, 3, [](int, int i) { return 1.0 - 0.03 * i; });
  EXPECT_EQ(tuner.choice({1}), 0);
  // and one a fifth faster still wins under the same drift
  drive(tuner, {2}, 0, 3, [](int c, int i) { return (c == 1 ? 0.8 : 1.0) * (1.0 - 0.03 * i); });
  EXPECT_EQ(tuner.choice({2}), 1);
}

TEST(GemmTuner, BaselineStaysWithinTheMargin) {
  ops::GemmTuner tuner;
  tuner.set_enabled(true);
  const double almost = 1.0 - ops::GemmTuner::kMargin / 2;
  drive(tuner, {7}, -1, 2, [&](int c, int) { return c == 1 ? almost : 1.0; });
  EXPECT_EQ(tuner.choice({7}), -1);
  const double clearly = 1.0 - 2 * ops::GemmTuner::kMargin;
  drive(tuner, {8}, -1, 2, [&](int c, int) { return c == 0 ? clearly : 1.0; });
  EXPECT_EQ(tuner.choice({8}), 0);
}

TEST(GemmTuner, FailedCandidatesTakeNoMoreTurns) {
  ops::GemmTuner tuner;
  tuner.set_enabled(true);
  const std::vector<int> ran = drive(
      tuner, {1}, 0, 3, [](int c, int) { return c == 2 ? 0.1 : 1.0; }, /*fails=*/{2}, 1000, "fc1");
  EXPECT_EQ(count(ran, 2), 0);
  EXPECT_EQ(count(ran, 0), ops::GemmTuner::kSamples);
  EXPECT_EQ(tuner.choice({1}), 0);  // candidate 1 ties with the baseline
  ASSERT_EQ(tuner.details().size(), 1u);
  EXPECT_EQ(tuner.details()[0], "fc1: 0 1000.000, 1 1000.000, 2 - ms; kept 0 (1.00x)");
  // a failed baseline: the fastest of the others, without the margin
  drive(tuner, {2}, 0, 3, [](int c, int) { return c == 1 ? 0.3 : 0.29; }, /*fails=*/{0});
  EXPECT_EQ(tuner.choice({2}), 2);
}

TEST(GemmTuner, OffOrOneCandidateHandsOutTheBaselineUntimed) {
  EXPECT_FALSE(ops::GemmTuner().enabled());  // off unless asked (--gemm-autotune)
  ops::GemmTuner tuner;
  ops::GemmTuner::Turn t = tuner.next({1}, 0, 5);
  EXPECT_EQ(t.candidate, 0);
  EXPECT_FALSE(t.timed);
  EXPECT_TRUE(t.final);
  tuner.set_enabled(true);
  t = tuner.next({2}, -1, 0);  // cublasGemmEx alone
  EXPECT_EQ(t.candidate, -1);
  EXPECT_FALSE(t.timed);
  EXPECT_EQ(tuner.trials_in_progress(), 0u);
  t = tuner.next({3}, 0, 5);
  EXPECT_TRUE(t.timed);
  EXPECT_FALSE(t.final);
  EXPECT_EQ(tuner.trials_in_progress(), 1u);
  tuner.set_enabled(false);  // off again mid-trial: the baseline, untimed
  t = tuner.next({3}, 0, 5);
  EXPECT_EQ(t.candidate, 0);
  EXPECT_FALSE(t.timed);
}

TEST(GemmTuner, SummaryAndDetails) {
  ops::GemmTuner tuner;
  tuner.set_enabled(true);
  EXPECT_EQ(tuner.summary(), "");
  EXPECT_TRUE(tuner.details().empty());
  drive(
      tuner, {1}, 0, 2, [](int c, int) { return c == 0 ? 1e-3 : 0.5e-3; }, {}, 1000, "DGELU 8x4x2");  // 2x
  drive(tuner, {2}, 0, 2, [](int c, int) { return c == 0 ? 1e-3 : 0.995e-3; });   // within the margin
  drive(tuner, {3}, -1, 1, [](int c, int) { return c == -1 ? 1.25e-3 : 1e-3; });  // 1.25x
  const std::string s = tuner.summary();
  EXPECT_NE(s.find("3 GEMM shape(s) timed"), std::string::npos) << s;
  EXPECT_NE(s.find("2 run faster than the baseline"), std::string::npos) << s;
  EXPECT_NE(s.find(": 2.00x, 1.25x"), std::string::npos) << s;
  const std::vector<std::string> d = tuner.details();
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0], "DGELU 8x4x2: 0 1.000, 1 0.500 ms; kept 1 (2.00x)");
  EXPECT_EQ(d[1], "GEMM: 0 1.000, 1 0.995 ms; kept 0 (1.00x)");
  EXPECT_EQ(d[2], "GEMM: -1 1.250, 0 1.000 ms; kept 0 (1.25x)");
}

TEST(GemmTuner, RecordsAreKeptPerKey) {
  ops::GemmTuner tuner;
  EXPECT_TRUE(tuner.record({1, 2}).empty());
  tuner.keep_record({1, 2}, {1, 42, 43});
  EXPECT_EQ(tuner.record({1, 2}), (std::vector<uint64_t>{1, 42, 43}));
  EXPECT_TRUE(tuner.record({1, 3}).empty());
}

#ifdef MEGATON_HAVE_CUDA
TEST(KernelsGemmTuner, TunedWeightGradientOverwritesAndAddsOnEveryTurn) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(2);
  ops::GemmTuner& tuner = ops::gemm_tuner();
  tuner.set_enabled(true);  // as --gemm-autotune
  const auto o = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  for (auto [tokens, in, out] : {std::tuple<int64_t, int64_t, int64_t>{4096, 768, 2304}, {1000, 64, 48}}) {
    torch::Tensor dy = torch::randn({tokens, out}, o), x = torch::randn({tokens, in}, o);
    const torch::Tensor ref = torch::mm(dy.t().to(torch::kFloat32), x.to(torch::kFloat32));  // [out, in]
    const double tol = 1e-3 * ref.abs().max().item<double>();
    int calls = 0;
    do {  // every candidate's turn gives the product: overwriting, then adding (two shapes of the tuner: beta 0, 1)
      torch::Tensor main = torch::full({out, in}, 7.0f, o.dtype(torch::kFloat32));
      ops::lt::wgrad_fp32_tuned(dy, x, main, /*overwrite=*/true);
      ASSERT_LE((main - ref).abs().max().item<double>(), tol) << tokens << " " << in << " " << out << " " << calls;
      ops::lt::wgrad_fp32_tuned(dy, x, main, /*overwrite=*/false);  // adds: 2 ref
      ASSERT_LE((main - 2 * ref).abs().max().item<double>(), 2 * tol) << tokens << " " << in << " " << out;
    } while (++calls < 500 && tuner.trials_in_progress() > 0);
    EXPECT_EQ(tuner.trials_in_progress(), 0u) << "trials not over after " << calls << " calls";
  }
  EXPECT_GE(tuner.details().size(), 4u);  // two shapes x (overwrite, add), each with its candidates' medians
  // off: the baseline (cublasGemmEx), the same product
  tuner.set_enabled(false);
  torch::Tensor dy = torch::randn({512, 96}, o), x = torch::randn({512, 32}, o);
  torch::Tensor main = torch::zeros({96, 32}, o.dtype(torch::kFloat32));
  ops::lt::wgrad_fp32_tuned(dy, x, main, true);
  const torch::Tensor ref = torch::mm(dy.t().to(torch::kFloat32), x.to(torch::kFloat32));
  EXPECT_LE((main - ref).abs().max().item<double>(), 1e-3 * ref.abs().max().item<double>());
}
#endif
