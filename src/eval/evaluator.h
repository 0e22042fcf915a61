// Batched zero-shot evaluation of a TP x PP x DP model (Megatron's tasks/zeroshot_gpt/evaluate.py): windows are dealt
// to data-parallel replicas round-robin in micro-batches (each window once: no DistributedSampler padding), every
// replica runs its batches through the pipeline, the last stage scores them, and the per-replica sums are
// all-reduced over DP and broadcast from the last stage, so every rank returns the same totals.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/log.h"
#include "core/timer.h"
#include "eval/lm_windows.h"
#include "infer/stage_runner.h"

namespace megaton::eval {

struct LossTotals {
  double loss_sum = 0.0;  // sum over scored targets of -log p(target), fp32 cross-entropy (vocab-parallel)
  int64_t scored = 0;     // targets with mask 1
};

struct AccuracyTotals {
  int64_t correct = 0;  // examples whose every target token is the greedy argmax
  int64_t total = 0;
};

/// `window(i)` for i in [0, n) gives the examples; micro_batch examples per forward.
using WindowFn = std::function<Window(int64_t)>;

/// With `log`, rank 0 reports progress every `progress_s` seconds: examples done, rate, ETA.
LossTotals evaluate_loss(infer::StageRunner& runner, int64_t n, const WindowFn& window, int64_t micro_batch,
                         const Logger* log = nullptr, double progress_s = kProgressEverySeconds);
AccuracyTotals evaluate_accuracy(infer::StageRunner& runner, int64_t n, const WindowFn& window, int64_t micro_batch,
                                 const Logger* log = nullptr, double progress_s = kProgressEverySeconds);

/// Megatron's WIKITEXT103 report values.
struct PerplexityReport {
  double avg_loss = 0, ppl = 0, adjusted_ppl = 0, token_ratio = 0;
};
/// avg_loss = loss_sum / (num_tokenized - 1); ppl = exp(min(20, avg_loss)); token_ratio = (num_tokenized - 1) /
/// (num_original - 1); adjusted_ppl = exp(min(20, avg_loss * token_ratio)).
PerplexityReport perplexity_report(double loss_sum, int64_t num_tokenized, int64_t num_original);

/// "validation results on WIKITEXT103 | avg loss: 3.1234E+00 | ppl: ... | adjusted ppl: ... | token ratio: ... |"
std::string format_perplexity(const std::string& task, const PerplexityReport& r);
/// "validation results on LAMBADA | number correct: ... | total examples: ... | avg accuracy: ..."
std::string format_accuracy(const std::string& task, const AccuracyTotals& t);

}  // namespace megaton::eval
