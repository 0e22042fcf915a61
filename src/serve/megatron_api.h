// Megatron-LM's text generation endpoint (megatron/text_generation_server.py), PUT /api, for its existing clients:
//   {"prompts": [str, ...] (1..128), "tokens_to_generate": 64, "logprobs": false, "temperature": 1.0 (0 < t <= 100),
//    "top_k": 0, "top_p": 0.0 (not both), "add_BOS": false, "stop_on_eol": false, "stop_on_double_eol": false,
//    "random_seed": -1}
// -> {"text": [prompt + generation, ...], "segments": [[token text, ...], ...], "logprobs": [[log p(token[i]) for
//    i >= 1], ...] or null}. A generation ends at the end-of-document token (kept, as Megatron detokenizes it) or, with
// stop_on_eol / stop_on_double_eol, after a newline / blank line. Errors are a JSON string with status 400, as
// Megatron's server answers them; fields it retired (max_len, sentences) and beam search are refused by name.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "data/tokenizer.h"
#include "serve/decode_batch.h"

namespace megaton::serve {

inline constexpr int64_t kMegatronMaxPrompts = 128;

struct MegatronRequest {
  std::vector<std::vector<int32_t>> prompts;
  int64_t tokens_to_generate = 64;
  bool logprobs = false;
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 0.0;
  bool stop_on_eol = false, stop_on_double_eol = false;
  int64_t random_seed = -1;  // -1: a fresh seed per request
};

/// ApiError(400) naming the field, with Megatron's wording where it has one.
MegatronRequest parse_megatron_request(const nlohmann::json& body, data::Tokenizer& tok, int64_t seq_length,
                                       int64_t max_rows);

/// The rows to decode; `seed` is used when the request gives none.
std::vector<RowSpec> megatron_rows(const MegatronRequest& req, uint64_t seed);

nlohmann::json megatron_response(const MegatronRequest& req, const std::vector<RowResult>& rows,
                                 const data::Tokenizer& tok);

}  // namespace megaton::serve
