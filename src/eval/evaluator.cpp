#include "eval/evaluator.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "core/timer.h"

namespace megaton::eval {

namespace {

// The examples [first, first + count) as tokens [b, seq+1] int64 and mask [b, seq] fp32 (CPU).
std::pair<torch::Tensor, torch::Tensor> make_batch(const WindowFn& window, int64_t first, int64_t count) {
  std::vector<Window> ws;
  for (int64_t i = first; i < first + count; ++i) ws.push_back(window(i));
  const int64_t s1 = static_cast<int64_t>(ws.front().tokens.size());
  torch::Tensor tokens = torch::empty({count, s1}, torch::kInt64);      // [b, seq+1]
  torch::Tensor mask = torch::empty({count, s1 - 1}, torch::kFloat32);  // [b, seq]
  auto ta = tokens.accessor<int64_t, 2>();
  auto ma = mask.accessor<float, 2>();
  for (int64_t r = 0; r < count; ++r) {
    MEGATON_ASSERT(static_cast<int64_t>(ws[r].tokens.size()) == s1 && static_cast<int64_t>(ws[r].mask.size()) == s1 - 1,
                   "evaluation windows of different lengths");
    for (int64_t j = 0; j < s1; ++j) ta[r][j] = ws[r].tokens[j];
    for (int64_t j = 0; j + 1 < s1; ++j) ma[r][j] = ws[r].mask[j];
  }
  return {tokens, mask};
}

// Runs every micro-batch of this DP replica; on the last stage score(logits [s, b, V/tp], labels [b, s] (device),
// mask [b, s] (device)) returns two numbers that are summed. Returns the sums over all replicas, on every rank.
template <typename Score>
std::pair<double, double> run_batches(infer::StageRunner& runner, int64_t n, const WindowFn& window,
                                      int64_t micro_batch, Score score, const Logger* log, double progress_s) {
  MEGATON_CHECK(micro_batch > 0, UsageError, "--micro-batch-size must be > 0");
  torch::NoGradGuard no_grad;
  const auto& g = runner.groups();
  const int64_t dp = g.grid.dp_size(), me = g.coords.dp;
  double a = 0, b = 0;
  Progress progress(static_cast<double>(n), "examples");
  for (int64_t first = me * micro_batch; first < n; first += dp * micro_batch) {
    const int64_t count = std::min(micro_batch, n - first);
    if (log && progress.due(progress_s)) {
      // Every replica runs the same number of batches: those dealt before this one, over all replicas.
      log->info0("eval: ", progress.line(static_cast<double>(std::min(n, first - me * micro_batch))));
    }
    auto [tokens, mask] = make_batch(window, first, count);
    const int64_t s = tokens.size(1) - 1;
    torch::Tensor logits = runner.forward(tokens.narrow(1, 0, s), nullptr);  // [s, b, V/tp] on the last stage
    if (runner.is_last_stage()) {
      torch::Tensor labels = tokens.narrow(1, 1, s).to(runner.device());  // [b, s]
      auto [x, y] = score(logits, labels, mask.to(runner.device()));
      a += x;
      b += y;
    }
  }
  torch::Tensor t = torch::tensor({a, b}, torch::kFloat64).to(runner.device());  // [2]
  g.dp->all_reduce(t, dist::ReduceOp::kSum);
  runner.broadcast_from_last(t);
  t = t.cpu();
  return {t[0].item<double>(), t[1].item<double>()};
}

std::string sci(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.4E", v);
  return b;
}

// Python's repr of a float: the shortest decimal that round-trips.
std::string py_float(double v) {
  char b[64];
  auto r = std::to_chars(b, b + sizeof b, v);
  std::string s(b, r.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

LossTotals evaluate_loss(infer::StageRunner& runner, int64_t n, const WindowFn& window, int64_t micro_batch,
                         const Logger* log, double progress_s) {
  auto [loss, scored] = run_batches(
      runner, n, window, micro_batch,
      [&](const torch::Tensor& logits, const torch::Tensor& labels, const torch::Tensor& mask) {
        torch::Tensor losses = runner.stage().token_losses(logits.to(torch::kFloat32), labels);  // [b, s]
        return std::pair<double, double>((losses * mask).sum().item<double>(), mask.sum().item<double>());
      },
      log, progress_s);
  return {loss, static_cast<int64_t>(std::llround(scored))};
}

AccuracyTotals evaluate_accuracy(infer::StageRunner& runner, int64_t n, const WindowFn& window, int64_t micro_batch,
                                 const Logger* log, double progress_s) {
  auto [correct, total] = run_batches(
      runner, n, window, micro_batch,
      [&](const torch::Tensor& logits, const torch::Tensor& labels, const torch::Tensor& mask) {
        torch::Tensor pred = runner.gather_vocab(logits).argmax(-1).t();  // [b, s]
        torch::Tensor ok = (pred == labels) | (mask == 0);                // [b, s]
        torch::Tensor all = ok.all(-1);                                   // [b]
        return std::pair<double, double>(all.sum().item<double>(), double(labels.size(0)));
      },
      log, progress_s);
  return {static_cast<int64_t>(std::llround(correct)), static_cast<int64_t>(std::llround(total))};
}

PerplexityReport perplexity_report(double loss_sum, int64_t num_tokenized, int64_t num_original) {
  MEGATON_CHECK(num_tokenized > 1 && num_original > 1, DataError, "perplexity needs at least 2 tokens and 2 words (",
                num_tokenized, " tokens, ", num_original, " words)");
  PerplexityReport r;
  r.avg_loss = loss_sum / double(num_tokenized - 1);
  r.ppl = std::exp(std::min(20.0, r.avg_loss));
  r.token_ratio = double(num_tokenized - 1) / double(num_original - 1);
  r.adjusted_ppl = std::exp(std::min(20.0, r.avg_loss * r.token_ratio));
  return r;
}

std::string format_perplexity(const std::string& task, const PerplexityReport& r) {
  return " validation results on " + task + " | avg loss: " + sci(r.avg_loss) + " | ppl: " + sci(r.ppl) +
         " | adjusted ppl: " + sci(r.adjusted_ppl) + " | token ratio: " + py_float(r.token_ratio) + " |";
}

std::string format_accuracy(const std::string& task, const AccuracyTotals& t) {
  const double acc = t.total > 0 ? double(t.correct) / double(t.total) : 0.0;
  return " validation results on " + task + " | number correct: " + sci(double(t.correct)) +
         " | total examples: " + sci(double(t.total)) + " | avg accuracy: " + sci(acc);
}

}  // namespace megaton::eval
