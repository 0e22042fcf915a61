#include "infer/generator.h"

#include <algorithm>

#include "core/error.h"

namespace megaton::infer {

GenerateResult generate(StageRunner& runner, const std::vector<std::vector<int32_t>>& contexts,
                        const GenerateOptions& o, at::Generator& gen, const StepCallback& on_step) {
  torch::NoGradGuard no_grad;
  const int64_t b = static_cast<int64_t>(contexts.size());
  MEGATON_CHECK(b > 0, InternalError, "generate needs at least one context");
  MEGATON_CHECK(o.seq_length > 1, UsageError, "--seq-length must be > 1 for generation, got ", o.seq_length);
  torch::Tensor tokens = torch::full({b, o.seq_length}, o.pad_id, torch::kInt64);  // [b, seq]
  std::vector<int64_t> prompt_len(b);
  for (int64_t r = 0; r < b; ++r) {
    const auto& ctx = contexts[r];
    MEGATON_CHECK(!ctx.empty(), DataError, "context ", r, " of the batch has no tokens");
    MEGATON_CHECK(static_cast<int64_t>(ctx.size()) < o.seq_length, DataError, "context ", r, " has ", ctx.size(),
                  " tokens; it must be shorter than --seq-length (", o.seq_length, ")");
    prompt_len[r] = static_cast<int64_t>(ctx.size());
    auto acc = tokens.accessor<int64_t, 2>();
    for (size_t i = 0; i < ctx.size(); ++i) acc[r][i] = ctx[i];
  }
  int64_t context_length = *std::min_element(prompt_len.begin(), prompt_len.end());
  int64_t maxlen = o.seq_length - 1;
  if (maxlen > context_length + o.out_seq_length) maxlen = context_length + o.out_seq_length;

  GenerateResult res;
  res.lengths.assign(b, maxlen);
  res.finished.assign(b, false);
  model::KvCache cache;
  int64_t fed = 0;  // positions already in the cache
  const auto dev_opts = torch::TensorOptions().dtype(torch::kInt64).device(runner.device());
  while (context_length <= maxlen) {
    torch::Tensor logits;  // [s, b, V/tp] on the last stage
    if (o.recompute) {
      logits = runner.forward(tokens.narrow(1, 0, context_length), nullptr);
    } else {
      logits = runner.forward(tokens.narrow(1, fed, context_length - fed), &cache);
      fed = context_length;
    }
    ++res.steps;
    torch::Tensor next = torch::zeros({b}, dev_opts);  // [b]
    if (runner.is_last_stage()) {
      torch::Tensor last = runner.gather_vocab(logits.select(0, logits.size(0) - 1));  // [b, V]
      next.copy_(sample_next(last, o.sampling, gen));
    }
    runner.broadcast_from_last(next);
    next = next.cpu();
    auto acc = tokens.accessor<int64_t, 2>();
    auto nxt = next.accessor<int64_t, 1>();
    bool all_done = true;
    for (int64_t r = 0; r < b; ++r) {
      const bool started = prompt_len[r] <= context_length;
      if (started) acc[r][context_length] = nxt[r];
      if (started && nxt[r] == o.eos_id && !res.finished[r]) {
        res.finished[r] = true;
        res.lengths[r] = context_length;
      }
      all_done = all_done && res.finished[r];
    }
    ++context_length;
    if (on_step) on_step(tokens.narrow(1, 0, context_length), context_length);
    if (all_done) break;
  }
  res.end = context_length;
  res.tokens = tokens.narrow(1, 0, context_length).clone();
  return res;
}

std::vector<int32_t> row_tokens(const GenerateResult& r, int64_t row) {
  const int64_t end = r.finished[row] ? r.lengths[row] : r.end;
  auto acc = r.tokens.accessor<int64_t, 2>();
  std::vector<int32_t> out(end);
  for (int64_t i = 0; i < end; ++i) out[i] = static_cast<int32_t>(acc[row][i]);
  return out;
}

}  // namespace megaton::infer
