#include "serve/decode_batch.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "infer/sampling.h"

namespace megaton::serve {

size_t find_stop(const std::string& text, const std::vector<std::string>& stop) {
  size_t first = std::string::npos;
  for (const auto& s : stop) {
    if (s.empty()) continue;
    first = std::min(first, text.find(s));
  }
  return first;
}

size_t longest_stop(const std::vector<std::string>& stop) {
  size_t longest = 0;
  for (const auto& s : stop) longest = std::max(longest, s.size());
  return longest;
}

namespace {

// Per position: [log p(target), k ids, k log-probs] (floats; ids are exact below 2^24).
int64_t stat_width(int64_t k) {
  return 1 + 2 * k;
}

// full [n, V] fp32 logits and targets [n] -> [n, 1 + 2k]: the targets' log-probabilities and the k best.
torch::Tensor position_stats(const torch::Tensor& full, const torch::Tensor& targets, int64_t k) {
  torch::Tensor lp = torch::log_softmax(full, -1);             // [n, V]
  torch::Tensor chosen = lp.gather(1, targets.view({-1, 1}));  // [n, 1]
  if (k == 0) return chosen;
  auto [vals, ids] = lp.topk(std::min<int64_t>(k, lp.size(1)), -1);  // [n, k]
  return torch::cat({chosen, ids.to(torch::kFloat32), vals}, 1);     // [n, 1 + 2k]
}

// Appends one position's stats (a row of [1 + 2k] floats) to a row result.
void append_stats(RowResult& r, const float* s, int64_t k, int64_t row_k) {
  r.logprobs.push_back(s[0]);
  std::vector<std::pair<int32_t, float>> top;
  for (int64_t j = 0; j < row_k; ++j) top.emplace_back(static_cast<int32_t>(s[1 + j]), s[1 + k + j]);
  r.top.push_back(std::move(top));
}

bool hits_stop(const data::Tokenizer& tok, const RowResult& r, const RowSpec& spec) {
  if (spec.stop.empty()) return false;
  const size_t longest = longest_stop(spec.stop);
  // Every token decodes to at least one byte, so a stop string that the last token completed lies within the last
  // `longest` tokens.
  const int64_t from = std::max<int64_t>(r.prompt_len, static_cast<int64_t>(r.tokens.size()) - longest);
  std::vector<int32_t> tail(r.tokens.begin() + from, r.tokens.end());
  return find_stop(tok.decode(tail), spec.stop) != std::string::npos;
}

}  // namespace

std::vector<RowResult> decode_batch(infer::StageRunner& runner, const data::Tokenizer& tok,
                                    const std::vector<RowSpec>& rows, int64_t seq_length,
                                    const BatchStepCallback& on_step) {
  torch::NoGradGuard no_grad;
  const int64_t b = static_cast<int64_t>(rows.size());
  MEGATON_CHECK(b > 0, InternalError, "decode_batch needs at least one row");
  int64_t ctx = std::numeric_limits<int64_t>::max(), end = 0, k = 0;
  bool want_lp = false;
  for (const auto& r : rows) {
    const int64_t p = static_cast<int64_t>(r.prompt.size());
    MEGATON_CHECK(p > 0 && r.max_new >= 0 && p + r.max_new <= seq_length, InternalError, "row of ", p,
                  " prompt tokens + ", r.max_new, " new does not fit --seq-length ", seq_length);
    ctx = std::min(ctx, p);
    end = std::max(end, p + r.max_new);
    want_lp = want_lp || r.logprobs;
    if (r.logprobs) k = std::max(k, r.top_logprobs);
  }
  const int64_t width = stat_width(k);
  const torch::Device dev = runner.device();
  const auto fopts = torch::TensorOptions().dtype(torch::kFloat32).device(dev);
  torch::Tensor tokens = torch::full({b, end}, tok.eod(), torch::kInt64);  // [b, end]
  auto acc = tokens.accessor<int64_t, 2>();
  std::vector<RowResult> out(b);
  std::vector<at::Generator> gens;
  for (int64_t r = 0; r < b; ++r) {
    const auto& p = rows[r].prompt;
    for (size_t i = 0; i < p.size(); ++i) acc[r][i] = p[i];
    out[r].prompt_len = static_cast<int64_t>(p.size());
    out[r].tokens.assign(p.begin(), p.begin() + ctx);
    gens.push_back(at::detail::createCPUGenerator(rows[r].seed));
  }

  // Prefill: positions [0, ctx), every row's prompt; their targets 1..ctx-1 are prompt tokens of every row.
  model::KvCache cache;
  torch::Tensor logits = runner.forward(tokens.narrow(1, 0, ctx), &cache);  // last stage: [ctx, b, V/tp]
  if (want_lp) {
    torch::Tensor stats = torch::zeros({b, ctx - 1, width}, fopts);  // [b, ctx-1, 1+2k]
    if (runner.is_last_stage() && ctx > 1) {
      for (int64_t r = 0; r < b; ++r) {  // one row at a time: [ctx, V] fp32 at most
        if (!rows[r].logprobs) continue;
        torch::Tensor full = runner.gather_vocab(logits.narrow(0, 0, ctx - 1).narrow(1, r, 1)).squeeze(1);
        torch::Tensor targets = tokens.narrow(1, 1, ctx - 1).select(0, r).to(dev);
        stats.select(0, r).narrow(1, 0, 1 + 2 * std::min(k, full.size(1))).copy_(position_stats(full, targets, k));
      }
    }
    runner.broadcast_from_last(stats);
    stats = stats.cpu();
    const float* s = stats.data_ptr<float>();
    for (int64_t r = 0; r < b; ++r) {
      if (!rows[r].logprobs) continue;
      out[r].logprobs.push_back(std::numeric_limits<float>::quiet_NaN());
      out[r].top.emplace_back();
      for (int64_t i = 0; i < ctx - 1; ++i)
        append_stats(out[r], s + (r * (ctx - 1) + i) * width, k, rows[r].top_logprobs);
    }
  }
  std::vector<bool> done(b);
  for (int64_t r = 0; r < b; ++r) done[r] = out[r].prompt_len == ctx && rows[r].max_new == 0;

  while (ctx < end && !std::all_of(done.begin(), done.end(), [](bool d) { return d; })) {
    // The token at position ctx of each row (a prompt token, or a sample) and its stats, from the last position.
    torch::Tensor step = torch::zeros({b, 1 + width}, fopts);  // [b, next id + 1 + 2k]
    if (runner.is_last_stage()) {
      torch::Tensor last = runner.gather_vocab(logits.narrow(0, logits.size(0) - 1, 1)).squeeze(0);  // [b, V]
      // Known tokens and samples are decided on the host; greedy rows (-1 here) take the device's argmax, so a
      // greedy batch never waits for the device inside the step.
      std::vector<int64_t> next(b, -1);
      for (int64_t r = 0; r < b; ++r) {
        const RowSpec& spec = rows[r];
        if (done[r]) {
          next[r] = tok.eod();
        } else if (ctx < out[r].prompt_len) {
          next[r] = acc[r][ctx];
        } else if (spec.temperature != 0.0) {
          const double top_p = spec.top_p >= 1.0 ? 0.0 : spec.top_p;
          next[r] = infer::sample_next(last.narrow(0, r, 1), {false, spec.temperature, spec.top_k, top_p}, gens[r])
                        .item<int64_t>();
        }
      }
      torch::Tensor chosen = torch::tensor(next, torch::kInt64).to(dev);            // [b]
      torch::Tensor next_dev = torch::where(chosen >= 0, chosen, last.argmax(-1));  // [b]
      step.select(1, 0).copy_(next_dev.to(torch::kFloat32));
      if (want_lp) step.narrow(1, 1, 1 + 2 * std::min(k, last.size(1))).copy_(position_stats(last, next_dev, k));
    }
    runner.broadcast_from_last(step);
    step = step.cpu();
    const float* s = step.data_ptr<float>();
    for (int64_t r = 0; r < b; ++r) {
      if (done[r]) continue;
      const int32_t id = static_cast<int32_t>(s[r * (1 + width)]);
      acc[r][ctx] = id;
      RowResult& res = out[r];
      res.tokens.push_back(id);
      if (rows[r].logprobs) append_stats(res, s + r * (1 + width) + 1, k, rows[r].top_logprobs);
      if (ctx + 1 < res.prompt_len) continue;  // still in the prompt
      if (ctx >= res.prompt_len) {             // a generated token
        if (rows[r].stop_at_eos && id == tok.eod()) {
          res.finish = Finish::kEos;
        } else if (hits_stop(tok, res, rows[r])) {
          res.finish = Finish::kStop;
        }
      }
      done[r] = res.finish != Finish::kLength || res.generated() >= rows[r].max_new;
    }
    ++ctx;
    if (on_step) on_step(out, done);
    if (ctx >= end || std::all_of(done.begin(), done.end(), [](bool d) { return d; })) break;
    logits = runner.forward(tokens.narrow(1, ctx - 1, 1), &cache);  // [1, b, V/tp]
  }
  return out;
}

}  // namespace megaton::serve
