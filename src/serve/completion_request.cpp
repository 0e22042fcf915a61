#include "serve/completion_request.h"

#include <cmath>

#include "core/error.h"
#include "serve/api_error.h"

namespace megaton::serve {

namespace {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw ApiError(400, param, message);
}

double number_field(const json& body, const char* name, double fallback, double lo, double hi, const char* range) {
  if (!body.contains(name) || body[name].is_null()) return fallback;
  const json& v = body[name];
  if (!v.is_number()) bad(name, std::string("'") + name + "' must be a number, got " + v.dump());
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    bad(name, std::string("'") + name + "' must be " + range + ", got " + v.dump());
  return x;
}

int64_t int_field(const json& body, const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  if (!body.contains(name) || body[name].is_null()) return fallback;
  const json& v = body[name];
  if (!v.is_number_integer()) bad(name, std::string("'") + name + "' must be an integer, got " + v.dump());
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi)
    bad(name, std::string("'") + name + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                  std::to_string(x));
  return x;
}

bool bool_field(const json& body, const char* name) {
  if (!body.contains(name) || body[name].is_null()) return false;
  if (!body[name].is_boolean())
    bad(name, std::string("'") + name + "' must be true or false, got " + body[name].dump());
  return body[name].get<bool>();
}

std::vector<int32_t> token_ids(const json& list, int64_t vocab, const std::string& where) {
  std::vector<int32_t> ids;
  ids.reserve(list.size());
  for (const json& t : list) {
    if (!t.is_number_integer()) bad("prompt", where + " must hold token ids (integers), got " + t.dump());
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= vocab)
      bad("prompt", where + " has token id " + std::to_string(id) + ", outside the vocabulary [0, " +
                        std::to_string(vocab) + ")");
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

// "prompt": a string, a list of strings, a list of ids, or a list of lists of ids.
void read_prompts(const json& p, data::Tokenizer& tok, CompletionRequest& r) {
  const int64_t vocab = tok.vocab_size();
  auto add_text = [&](const std::string& s) {
    r.prompts.push_back(tok.encode(s));
    r.prompt_texts.push_back(s);
  };
  if (p.is_string()) {
    add_text(p.get<std::string>());
  } else if (p.is_array() && !p.empty() && p[0].is_number()) {
    r.prompts.push_back(token_ids(p, vocab, "'prompt'"));
    r.prompt_texts.emplace_back();
  } else if (p.is_array() && !p.empty()) {
    for (size_t i = 0; i < p.size(); ++i) {
      const std::string where = "'prompt[" + std::to_string(i) + "]'";
      if (p[i].is_string()) {
        add_text(p[i].get<std::string>());
      } else if (p[i].is_array()) {
        r.prompts.push_back(token_ids(p[i], vocab, where));
        r.prompt_texts.emplace_back();
      } else {
        bad("prompt", where + " must be a string or a list of token ids, got " + p[i].dump());
      }
    }
  } else {
    bad("prompt", "'prompt' must be a string, a list of strings, a list of token ids or a list of such lists; got " +
                      (p.is_array() ? std::string("an empty list") : p.dump()));
  }
}

}  // namespace

CompletionRequest parse_completion_request(const json& body, data::Tokenizer& tok, int64_t seq_length,
                                           int64_t max_rows) {
  if (!body.is_object()) bad("", "the request body must be a JSON object");
  CompletionRequest r;
  if (body.contains("model") && !body["model"].is_null()) {
    if (!body["model"].is_string()) bad("model", "'model' must be a string, got " + body["model"].dump());
    r.model = body["model"].get<std::string>();
  }
  if (!body.contains("prompt")) bad("prompt", "'prompt' is required");
  read_prompts(body["prompt"], tok, r);
  r.max_tokens = int_field(body, "max_tokens", 16, 0, int64_t(1) << 40);  // the context check below names the limit
  r.temperature = number_field(body, "temperature", 1.0, 0.0, 1e6, ">= 0");
  r.top_p = number_field(body, "top_p", 1.0, 0.0, 1.0, "in (0, 1]");
  if (r.top_p == 0.0) bad("top_p", "'top_p' must be in (0, 1], got 0");
  r.top_k = int_field(body, "top_k", 0, -1, int64_t(1) << 31);
  if (r.top_k < 0) r.top_k = 0;  // vLLM: -1 means off
  r.n = int_field(body, "n", 1, 1, max_rows);
  if (body.contains("best_of") && !body["best_of"].is_null() && int_field(body, "best_of", 1, 1, max_rows) != r.n)
    bad("best_of", "'best_of' other than n is not supported");
  if (body.contains("seed") && !body["seed"].is_null()) {
    if (!body["seed"].is_number_integer()) bad("seed", "'seed' must be an integer, got " + body["seed"].dump());
    r.seed = static_cast<uint64_t>(body["seed"].get<int64_t>());
  }
  if (body.contains("stop") && !body["stop"].is_null()) {
    const json& s = body["stop"];
    if (s.is_string()) {
      r.stop.push_back(s.get<std::string>());
    } else if (s.is_array()) {
      if (static_cast<int64_t>(s.size()) > kMaxStops)
        bad("stop",
            "'stop' takes at most " + std::to_string(kMaxStops) + " sequences, got " + std::to_string(s.size()));
      for (const json& x : s) {
        if (!x.is_string()) bad("stop", "'stop' must be a string or a list of strings, got " + x.dump());
        r.stop.push_back(x.get<std::string>());
      }
    } else {
      bad("stop", "'stop' must be a string or a list of strings, got " + s.dump());
    }
    for (const auto& x : r.stop)
      if (x.empty()) bad("stop", "'stop' sequences must not be empty");
  }
  if (body.contains("logprobs") && !body["logprobs"].is_null()) {
    if (body["logprobs"].is_boolean())
      bad("logprobs", "'logprobs' is the number of alternatives per token (0.." + std::to_string(kMaxLogprobs) +
                          ") in the completions API");
    r.logprobs = int_field(body, "logprobs", 0, 0, kMaxLogprobs);
  }
  r.echo = bool_field(body, "echo");
  r.stream = bool_field(body, "stream");
  r.ignore_eos = bool_field(body, "ignore_eos");
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    const json& so = body["stream_options"];
    if (!so.is_object()) bad("stream_options", "'stream_options' must be an object");
    if (!r.stream) bad("stream_options", "'stream_options' is only allowed with stream: true");
    r.include_usage = bool_field(so, "include_usage");
  }
  for (const char* penalty : {"presence_penalty", "frequency_penalty"})
    if (number_field(body, penalty, 0.0, -2.0, 2.0, "in [-2, 2]") != 0.0)
      bad(penalty, std::string("'") + penalty + "' other than 0 is not supported");
  if (body.contains("logit_bias") && !body["logit_bias"].is_null() && !body["logit_bias"].empty())
    bad("logit_bias", "'logit_bias' is not supported");
  if (body.contains("suffix") && !body["suffix"].is_null()) bad("suffix", "'suffix' is not supported");

  if (static_cast<int64_t>(r.prompts.size()) * r.n > max_rows)
    bad("prompt", str(r.prompts.size(), " prompts x n = ", r.n, " exceed the server's --max-batch-size of ", max_rows,
                      " rows; send fewer per request"));
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    const int64_t p = static_cast<int64_t>(r.prompts[i].size());
    if (p == 0) bad("prompt", "prompt " + std::to_string(i) + " has no tokens");
    if (p + r.max_tokens > seq_length)
      bad("max_tokens", str("This model's maximum context length is ", seq_length, " tokens, however you requested ",
                            p + r.max_tokens, " tokens (", p, " in prompt ", i, "; ", r.max_tokens,
                            " for the completion). Please reduce your prompt or completion length."));
  }
  if (r.max_tokens == 0 && !r.echo)
    bad("max_tokens", "'max_tokens' 0 returns nothing without 'echo': true (scoring a prompt needs echo)");
  return r;
}

}  // namespace megaton::serve
