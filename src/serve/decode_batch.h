// One batch of the server's rows decoded together over a TP x PP model replica. Each row has its own prompt, its own
// number of tokens to generate (0: only score the prompt), sampling settings, seed, stop strings and how many
// alternatives to report per position. Rows share positions: decoding starts after the shortest prompt, and a row
// whose prompt is longer keeps feeding its own prompt tokens until it ends (Megatron's sample_sequence_batch), so its
// prompt positions are scored on the way. With the KV cache every step feeds one position.
//
// Collective over the replica: every rank calls decode_batch() with the same rows and ends with the same tokens and
// log-probabilities (the last stage computes them and broadcasts them). Stop strings are checked on every rank from the
// same tokens with the same tokenizer, so every rank stops a row at the same step without another message.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "infer/stage_runner.h"

namespace megaton::serve {

struct RowSpec {
  std::vector<int32_t> prompt;    // >= 1 token
  int64_t max_new = 16;           // tokens to generate after the prompt (0: score the prompt only)
  double temperature = 1.0;       // 0: greedy (argmax)
  double top_p = 0.0;             // nucleus mass; 0 or 1: off
  int64_t top_k = 0;              // 0: off
  uint64_t seed = 0;              // this row's sampling generator
  bool logprobs = false;          // report log p(token) at every position
  int64_t top_logprobs = 0;       // and the k most likely tokens at every position (needs logprobs)
  bool stop_at_eos = true;        // an EOS (the tokenizer's EOD) ends the row
  std::vector<std::string> stop;  // strings whose appearance in the generated text ends the row
};

enum class Finish { kLength, kStop, kEos };

struct RowResult {
  std::vector<int32_t> tokens;  // prompt + generated (the ending EOS included)
  int64_t prompt_len = 0;
  // Per position i of `tokens`: log p(tokens[i] | tokens[<i]) (position 0: NaN) and, with top_logprobs, the k most
  // likely ids and their log-probabilities (position 0: empty). Empty without logprobs.
  std::vector<float> logprobs;
  std::vector<std::vector<std::pair<int32_t, float>>> top;
  Finish finish = Finish::kLength;
  int64_t generated() const { return static_cast<int64_t>(tokens.size()) - prompt_len; }
};

/// After each step, with every row's state so far (rank-local; for streaming).
using BatchStepCallback = std::function<void(const std::vector<RowResult>& rows, const std::vector<bool>& done)>;

/// InternalError for an empty prompt or prompt + max_new > seq_length (requests are validated before they get here).
std::vector<RowResult> decode_batch(infer::StageRunner& runner, const data::Tokenizer& tok,
                                    const std::vector<RowSpec>& rows, int64_t seq_length,
                                    const BatchStepCallback& on_step = {});

/// The first position in `text` where any of `stop` occurs (std::string::npos: none).
size_t find_stop(const std::string& text, const std::vector<std::string>& stop);

/// The length in bytes of the longest of `stop` (0 for none).
size_t longest_stop(const std::vector<std::string>& stop);

}  // namespace megaton::serve
