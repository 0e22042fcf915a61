// Zero-shot metrics on a tiny model equal a direct computation of the same formula: the sliding-window loss sum
// (each target scored once, with its own window as context) computed token by token from full forwards; LAMBADA
// accuracy on examples built to be right or wrong under greedy decoding; Megatron's report arithmetic and format.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <sstream>

#include "dist/self_communicator.h"
#include "eval/evaluator.h"
#include "eval/lm_windows.h"
#include "infer/infer_test_util.h"
#include "infer/stage_runner.h"
#include "model/gpt_stage.h"

using namespace megaton;

TEST(EvalMetrics, SlidingWindowLossEqualsDirectSum) {
  const auto groups = dist::single_rank_groups();
  auto c = infertest::byte_config("rotary");
  model::GptStage m(c, groups);
  infer::StageRunner runner(m, groups);
  const int64_t n = 45, seq = c.model.seq_length;
  std::vector<int32_t> toks(n);
  for (int64_t i = 0; i < n; ++i) toks[i] = static_cast<int32_t>((i * 37 + 11) % 257);
  for (int64_t stride : {int64_t{5}, seq}) {
    eval::LmWindows w(toks, seq, 256, stride);
    auto got = eval::evaluate_loss(
        runner, w.size(), [&](int64_t i) { return w.window(i); }, 3);
    EXPECT_EQ(got.scored, n - 1);
    // Direct: target j is scored in window 0 if j <= seq, else in window ceil((j - seq) / stride), at position
    // j - 1 - start of that window's forward.
    torch::NoGradGuard ng;
    double direct = 0;
    for (int64_t j = 1; j < n; ++j) {
      const int64_t win = j <= seq ? 0 : (j - seq + stride - 1) / stride;
      const int64_t start = win * stride;
      std::vector<int64_t> ids(seq, 256);
      for (int64_t k = 0; k < seq && start + k < n; ++k) ids[k] = toks[start + k];
      auto logits = m.forward(torch::tensor(ids).view({1, seq}));  // [s, 1, V]
      auto lp = torch::log_softmax(logits.select(1, 0).select(0, j - 1 - start).to(torch::kFloat64), -1);
      direct -= lp[toks[j]].item<double>();
    }
    EXPECT_NEAR(got.loss_sum, direct, 1e-5 * direct) << "stride " << stride;
  }
  // Progress: with a report every batch, rank 0 logs the examples done, the rate and the ETA.
  eval::LmWindows w(toks, seq, 256, 5);
  std::ostringstream progress;
  const Logger log(0, 1, LogLevel::kInfo, &progress);
  const auto again = eval::evaluate_loss(
      runner, w.size(), [&](int64_t i) { return w.window(i); }, 3, &log, 0.0);
  EXPECT_EQ(again.scored, n - 1);
  EXPECT_NE(progress.str().find("% 3/" + std::to_string(w.size()) + " examples, "), std::string::npos)
      << progress.str();
  EXPECT_NE(progress.str().find(" examples/s, elapsed "), std::string::npos) << progress.str();
  EXPECT_NE(progress.str().find(", ETA "), std::string::npos) << progress.str();
}

TEST(EvalMetrics, LambadaAccuracyCountsExamplesWhoseEveryTargetIsTheArgmax) {
  const auto groups = dist::single_rank_groups();
  auto c = infertest::byte_config();
  model::GptStage m(c, groups);
  infer::StageRunner runner(m, groups);
  const int64_t seq = c.model.seq_length;
  torch::NoGradGuard ng;
  // Greedy continuation of a context, two tokens deep.
  auto argmax_after = [&](std::vector<int32_t> ctx) {
    std::vector<int64_t> ids(ctx.begin(), ctx.end());
    auto logits = m.forward(torch::tensor(ids).view({1, -1}));  // [s, 1, V]
    return static_cast<int32_t>(logits[-1][0].narrow(0, 0, 257).argmax().item<int64_t>());
  };
  auto example = [&](std::vector<int32_t> ctx, std::vector<int32_t> target) {
    eval::Window w;
    w.tokens = ctx;
    w.tokens.insert(w.tokens.end(), target.begin(), target.end());
    std::vector<uint8_t> pm(ctx.size(), 0);
    pm.resize(w.tokens.size(), 1);
    pm.resize(seq + 1, 0);
    w.tokens.resize(seq + 1, 256);
    w.mask.assign(pm.begin() + 1, pm.end());
    return w;
  };
  std::vector<eval::Window> ex;
  int expected = 0;
  for (int k = 0; k < 7; ++k) {
    std::vector<int32_t> ctx{int32_t(10 + 3 * k), int32_t(40 + k), int32_t(90 + 5 * k)};
    const int32_t t1 = argmax_after(ctx);
    auto ctx2 = ctx;
    ctx2.push_back(t1);
    const int32_t t2 = argmax_after(ctx2);
    if (k % 3 == 0) {
      ex.push_back(example(ctx, {t1, t2}));  // both right
      ++expected;
    } else if (k % 3 == 1) {
      ex.push_back(example(ctx, {t1, int32_t((t2 + 1) % 256)}));  // second token wrong
    } else {
      ex.push_back(example(ctx, {int32_t((t1 + 1) % 256)}));  // wrong
    }
  }
  auto got = eval::evaluate_accuracy(
      runner, static_cast<int64_t>(ex.size()), [&](int64_t i) { return ex[i]; }, 2);
  EXPECT_EQ(got.total, 7);
  EXPECT_EQ(got.correct, expected);
}

TEST(EvalMetrics, ReportArithmeticAndFormat) {
  auto r = eval::perplexity_report(30.0, 11, 6);
  EXPECT_DOUBLE_EQ(r.avg_loss, 3.0);
  EXPECT_DOUBLE_EQ(r.ppl, std::exp(3.0));
  EXPECT_DOUBLE_EQ(r.token_ratio, 2.0);
  EXPECT_DOUBLE_EQ(r.adjusted_ppl, std::exp(6.0));
  auto big = eval::perplexity_report(250.0, 11, 6);  // avg 25: clamped at exp(20)
  EXPECT_DOUBLE_EQ(big.ppl, std::exp(20.0));
  EXPECT_DOUBLE_EQ(big.adjusted_ppl, std::exp(20.0));
  EXPECT_EQ(eval::format_perplexity("WIKITEXT103", r),
            " validation results on WIKITEXT103 | avg loss: 3.0000E+00 | ppl: 2.0086E+01 | adjusted ppl: 4.0343E+02 | "
            "token ratio: 2.0 |");
  EXPECT_EQ(eval::format_accuracy("LAMBADA", {3, 4}),
            " validation results on LAMBADA | number correct: 3.0000E+00 | total examples: 4.0000E+00 | avg accuracy: "
            "7.5000E-01");
  EXPECT_THROW(eval::perplexity_report(1.0, 1, 6), DataError);
}
