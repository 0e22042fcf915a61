// ops::GemmTuner with fake timings (CPU; the tuner is off unless set on): which candidate it keeps, that it measures
// each only on a key's first call (a warm-up round and kRounds measured ones), that a steady drift of the clock favours
// no candidate, the margin in the baseline's favour, failed candidates, the off switch. KernelsGemmTuner.*: the tuned
// cuBLASLt weight-gradient GEMM against the fp32 product on the GPU, overwriting and adding (skipped without CUDA).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "ops/gemm_tuner.h"
#ifdef MEGATON_HAVE_CUDA
#include "ops/cublaslt_gemm.h"
#include "ops/linear.h"
#endif

using namespace megaton;

namespace {

// seconds(c) from a table, counting the calls.
struct FakeTimes {
  std::map<int, double> seconds;
  std::map<int, int> calls;
  double operator()(int c) {
    ++calls[c];
    return seconds.at(c);
  }
};

}  // namespace

TEST(GemmTuner, KeepsTheFastestAndMeasuresOncePerKey) {
  ops::GemmTuner tuner;
  tuner.set_enabled(true);
  FakeTimes t{{{0, 1.0}, {1, 0.5}, {2, 0.7}}, {}};
  auto seconds = [&](int c) { return t(c); };
  EXPECT_EQ(tuner.choose({1, 2, 3}, 0, 3, seconds), 1);
  EXPECT_EQ(tuner.choose({1, 2, 3}, 0, 3, seconds), 1);  // kept, not measured again
  for (int c = 0; c < 3; ++c) EXPECT_EQ(t.calls[c], 1 + ops::GemmTuner::kRounds);
  t.seconds = {{0, 0.5}, {1, 1.0}, {2, 1.0}};
  EXPECT_EQ(tuner.choose({1, 2, 4}, 0, 3, seconds), 0);  // another key: measured anew
  EXPECT_EQ(tuner.choices().size(), 2u);
}

TEST(GemmTuner, SteadyClockDriftFavoursNoCandidate) {
  // three equally fast candidates timed while the clock rises (each measurement 6% of the first shorter than the one
  // before): timed one after another the last would look faster than the baseline by more than the margin and replace
  // it
  ops::GemmTuner tuner;
  tuner.set_enabled(true);
  int calls = 0;
  auto rising = [&](int) { return 1.0 - 0.06 * calls++; };
  EXPECT_EQ(tuner.choose({1}, 0, 3, rising), 0);
  calls = 0;  // and one a fifth faster still wins under the same drift
  EXPECT_EQ(tuner.choose({2}, 0, 3, [&](int c) { return (c == 1 ? 0.8 : 1.0) * (1.0 - 0.06 * calls++); }), 1);
}

TEST(GemmTuner, BaselineStaysWithinTheMargin) {
  ops::GemmTuner tuner;
  tuner.set_enabled(true);
  const double almost = 1.0 - ops::GemmTuner::kMargin / 2;
  EXPECT_EQ(tuner.choose({7}, -1, 2, [&](int c) { return c == 1 ? almost : 1.0; }), -1);
  const double clearly = 1.0 - 2 * ops::GemmTuner::kMargin;
  EXPECT_EQ(tuner.choose({8}, -1, 2, [&](int c) { return c == 0 ? clearly : 1.0; }), 0);
}

TEST(GemmTuner, FailedCandidatesAreSkipped) {
  ops::GemmTuner tuner;
  tuner.set_enabled(true);
  EXPECT_EQ(tuner.choose({1}, 0, 3, [](int c) { return c == 1 ? -1.0 : (c == 2 ? 0.1 : 1.0); }), 2);
  EXPECT_EQ(tuner.choose({2}, 0, 3, [](int c) { return c == 0 ? -1.0 : (c == 1 ? 0.3 : 0.2); }), 2);
  int calls = 0;  // candidate 2 fails only in a later round: skipped all the same
  EXPECT_EQ(tuner.choose({3}, 0, 3, [&](int c) { return c == 2 ? (++calls > 2 ? -1.0 : 0.1) : (c == 1 ? 0.5 : 1.0); }),
            1);
}

TEST(GemmTuner, OffOrOneCandidateReturnsTheBaselineUntimed) {
  EXPECT_FALSE(ops::GemmTuner().enabled());  // off unless asked (--gemm-autotune)
  ops::GemmTuner tuner;
  tuner.set_enabled(true);
  int calls = 0;
  auto seconds = [&](int c) { return ++calls, c == 0 ? 1.0 : 0.1; };
  EXPECT_EQ(tuner.choose({1}, 0, 1, seconds), 0);
  tuner.set_enabled(false);
  EXPECT_FALSE(tuner.enabled());
  EXPECT_EQ(tuner.choose({2}, 0, 5, seconds), 0);
  EXPECT_EQ(calls, 0);
  tuner.set_enabled(true);
  EXPECT_EQ(tuner.choose({2}, 0, 5, seconds), 1);
}

TEST(GemmTuner, SummaryCountsShapesAndGains) {
  ops::GemmTuner tuner;
  tuner.set_enabled(true);
  EXPECT_EQ(tuner.summary(), "");
  tuner.choose({1}, 0, 2, [](int c) { return c == 0 ? 1.0 : 0.5; });     // 2x
  tuner.choose({2}, 0, 2, [](int c) { return c == 0 ? 1.0 : 0.995; });   // within the margin: baseline
  tuner.choose({3}, -1, 1, [](int c) { return c == -1 ? 1.25 : 1.0; });  // 1.25x
  const std::string s = tuner.summary();
  EXPECT_NE(s.find("3 GEMM shape(s) timed"), std::string::npos) << s;
  EXPECT_NE(s.find("2 run faster than the baseline"), std::string::npos) << s;
  EXPECT_NE(s.find(": 2.00x, 1.25x"), std::string::npos) << s;
}

TEST(GemmTuner, DetailsListEveryCandidateAndTheKeptOne) {
  ops::GemmTuner tuner;
  tuner.set_enabled(true);
  EXPECT_TRUE(tuner.details().empty());
  tuner.choose(
      {1}, -1, 2, [](int c) { return c == -1 ? 2e-3 : (c == 0 ? -1.0 : 1e-3); }, "weight gradient 8x4x2");
  tuner.choose({2}, 0, 2, [](int c) { return c == 0 ? 1e-3 : 0.99e-3; });  // within the margin, no label
  const std::vector<std::string> d = tuner.details();
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0], "weight gradient 8x4x2: -1 2.000, 0 -, 1 1.000 ms; kept 1 (2.00x)");
  EXPECT_EQ(d[1], "GEMM: 0 1.000, 1 0.990 ms; kept 0 (1.00x)");
}

TEST(GemmTuner, RecordsAreKeptPerKey) {
  ops::GemmTuner tuner;
  tuner.set_enabled(true);
  EXPECT_TRUE(tuner.record({1, 2}).empty());
  tuner.keep_record({1, 2}, {1, 42, 43});
  EXPECT_EQ(tuner.record({1, 2}), (std::vector<uint64_t>{1, 42, 43}));
  EXPECT_TRUE(tuner.record({1, 3}).empty());
}

#ifdef MEGATON_HAVE_CUDA
TEST(KernelsGemmTuner, TunedWeightGradientOverwritesAndAdds) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(2);
  ops::gemm_tuner().set_enabled(true);  // as --gemm-autotune
  const auto o = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  for (auto [tokens, in, out] : {std::tuple<int64_t, int64_t, int64_t>{4096, 768, 2304}, {1000, 64, 48}}) {
    torch::Tensor dy = torch::randn({tokens, out}, o), x = torch::randn({tokens, in}, o);
    const torch::Tensor ref = torch::mm(dy.t().to(torch::kFloat32), x.to(torch::kFloat32));  // [out, in]
    torch::Tensor main = torch::full({out, in}, 7.0f, o.dtype(torch::kFloat32));
    ops::lt::wgrad_fp32_tuned(dy, x, main, /*overwrite=*/true);
    const double tol = 1e-3 * ref.abs().max().item<double>();
    EXPECT_LE((main - ref).abs().max().item<double>(), tol) << tokens << " " << in << " " << out;
    ops::lt::wgrad_fp32_tuned(dy, x, main, /*overwrite=*/false);  // adds: 2 ref
    EXPECT_LE((main - 2 * ref).abs().max().item<double>(), 2 * tol) << tokens << " " << in << " " << out;
  }
  EXPECT_FALSE(ops::gemm_tuner().choices().empty());  // the process-wide tuner measured them
  // off: the baseline (cublasGemmEx), the same product
  ops::gemm_tuner().set_enabled(false);
  torch::Tensor dy = torch::randn({512, 96}, o), x = torch::randn({512, 32}, o);
  torch::Tensor main = torch::zeros({96, 32}, o.dtype(torch::kFloat32));
  ops::lt::wgrad_fp32_tuned(dy, x, main, true);
  const torch::Tensor ref = torch::mm(dy.t().to(torch::kFloat32), x.to(torch::kFloat32));
  EXPECT_LE((main - ref).abs().max().item<double>(), 1e-3 * ref.abs().max().item<double>());
}
#endif
