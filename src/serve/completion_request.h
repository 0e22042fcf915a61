// The body of POST /v1/completions (the OpenAI completions API that lm-eval-harness's local-completions model and
// the usual clients send), checked field by field: an unknown type or value is an ApiError naming the field.
//   prompt       string | [string] | [int] | [[int]]   (token ids as the model's vocabulary numbers them)
//   max_tokens   >= 0, default 16 (0: only score the prompt, with echo)
//   temperature  >= 0, default 1 (0: greedy); top_p in (0, 1], default 1; top_k >= 0 (0: off; vLLM's extension)
//   n            choices per prompt, default 1; seed: the sampling seed (default: drawn per request)
//   stop         string | [string], at most kMaxStops (OpenAI allows 4; lm-eval-harness may send more)
//   logprobs     0..kMaxLogprobs alternatives per token; echo: the prompt's
//                tokens (and with logprobs their log-probabilities) come back before the completion
//   stream       server-sent events; stream_options.include_usage adds a last chunk with the token counts
//   ignore_eos   (vLLM's extension, for benchmarks) decode max_tokens tokens whatever comes
// Fields clients send that do not change a greedy or sampled completion here (user, presence_penalty = 0, ...) are
// accepted; penalties other than 0, best_of > n and logit_bias are refused by name.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace megaton::serve {

inline constexpr int64_t kMaxLogprobs = 20;
inline constexpr int64_t kMaxStops = 32;

struct CompletionRequest {
  std::string model;
  std::vector<std::vector<int32_t>> prompts;  // token ids
  std::vector<std::string> prompt_texts;      // the prompts as given ("" for token-id prompts)
  int64_t max_tokens = 16;
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;
  int64_t n = 1;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  std::optional<int64_t> logprobs;
  bool echo = false;
  bool stream = false;
  bool include_usage = false;
  bool ignore_eos = false;  // vLLM's extension: generate max_tokens even past an end-of-document token
};

/// Parses and checks `body` against the model: token ids inside the vocabulary, prompt + max_tokens within
/// `seq_length`, prompts * n within `max_rows`. `tok` encodes string prompts.
CompletionRequest parse_completion_request(const nlohmann::json& body, data::Tokenizer& tok, int64_t seq_length,
                                           int64_t max_rows);

}  // namespace megaton::serve
