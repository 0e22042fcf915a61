// What POST /v1/completions returns for decoded rows: the OpenAI "text_completion" object, or, when streaming, its
// chunks. A row's text is the completion (after the echoed prompt with echo), cut before the first stop string; the
// EOS that ended a row is not in the text but is a token of the logprobs (so clients that slice [ctxlen:-1] keep
// their continuation). logprobs hold, per token: its text ("bytes:\xNN..." when not valid UTF-8 alone, as OpenAI
// writes it), log p(token), the top alternatives {text: log p}, and its character offset in the text.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "serve/completion_request.h"
#include "serve/decode_batch.h"

namespace megaton::serve {

/// One row as the API shows it.
struct ChoiceView {
  std::string text;
  std::string finish_reason;   // "stop" | "length" ("" while a streamed row is not done)
  size_t completion_from = 0;  // where the completion starts in `text` (after the echoed prompt)
  std::vector<std::string> tokens;
  std::vector<double> token_logprobs;  // NaN: null (the first prompt token)
  std::vector<nlohmann::json> top_logprobs;
  std::vector<int64_t> text_offset;
};

/// `done`: the row has finished (a row in flight holds back nothing here; ChoiceStream does).
ChoiceView view_row(const RowResult& r, const data::Tokenizer& tok, const CompletionRequest& req, bool done);

/// The choice object: text[text_from:], logprobs entries [token_from:], finish_reason (null while unfinished).
nlohmann::json choice_json(const ChoiceView& v, int64_t index, bool with_logprobs, size_t text_from = 0,
                           size_t token_from = 0, bool finished = true);

/// {"prompt_tokens", "completion_tokens", "total_tokens"} of the rows (prompts counted once per choice, as OpenAI).
nlohmann::json usage_json(const std::vector<RowResult>& rows);

/// The whole response of a request whose rows are `rows` (prompt i's choice j at i * n + j).
nlohmann::json completion_json(const CompletionRequest& req, const std::vector<RowResult>& rows,
                               const data::Tokenizer& tok, const std::string& id, int64_t created,
                               const std::string& model);

/// The streamed side of one row: each call returns the choice chunk of what became final since the last call, or
/// null when nothing did. Text that could still turn into a stop string, and a cut UTF-8 sequence, wait for the next
/// token.
class ChoiceStream {
 public:
  ChoiceStream(const CompletionRequest& req, int64_t index) : req_(req), index_(index) {}
  nlohmann::json next(const RowResult& r, const data::Tokenizer& tok, bool done);
  bool finished() const { return finished_; }

 private:
  const CompletionRequest& req_;
  int64_t index_;
  size_t text_sent_ = 0, tokens_sent_ = 0;
  bool finished_ = false;
};

/// "data: {json}\n\n", one server-sent event.
std::string sse_event(const nlohmann::json& j);

/// nlohmann's dump with invalid UTF-8 replaced (never throws on text).
std::string dump_json(const nlohmann::json& j);

}  // namespace megaton::serve
