#include "serve/megatron_api.h"

#include "core/error.h"
#include "data/utf8.h"
#include "serve/api_error.h"

namespace megaton::serve {

using json = nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& field, const std::string& message) {
  throw ApiError(400, field, message);
}

bool flag(const json& body, const char* name) {
  if (!body.contains(name)) return false;
  if (!body[name].is_boolean()) bad(name, std::string(name) + " must be a boolean value");
  return body[name].get<bool>();
}

}  // namespace

MegatronRequest parse_megatron_request(const json& body, data::Tokenizer& tok, int64_t seq_length, int64_t max_rows) {
  if (!body.is_object()) bad("", "the request body must be a JSON object");
  if (!body.contains("prompts")) bad("prompts", "prompts argument required");
  if (body.contains("max_len")) bad("max_len", "max_len is no longer used.  Replace with tokens_to_generate");
  if (body.contains("sentences")) bad("sentences", "sentences is no longer used.  Replace with prompts");
  if (body.contains("beam_width")) bad("beam_width", "beam_width: beam search is not supported by megaton serve");
  const json& prompts = body["prompts"];
  if (!prompts.is_array()) bad("prompts", "prompts is not a list of strings");
  if (prompts.empty()) bad("prompts", "prompts is empty");
  const int64_t limit = std::min(kMegatronMaxPrompts, max_rows);
  if (static_cast<int64_t>(prompts.size()) > limit) bad("prompts", str("Maximum number of prompts is ", limit));
  MegatronRequest r;
  if (body.contains("tokens_to_generate")) {
    const json& t = body["tokens_to_generate"];
    if (!t.is_number_integer()) bad("tokens_to_generate", "tokens_to_generate must be an integer greater than 0");
    r.tokens_to_generate = t.get<int64_t>();
    if (r.tokens_to_generate < 0)
      bad("tokens_to_generate", "tokens_to_generate must be an integer greater than or equal to 0");
  }
  r.logprobs = flag(body, "logprobs");
  if (r.tokens_to_generate == 0 && !r.logprobs)
    bad("tokens_to_generate", "tokens_to_generate=0 implies logprobs should be True");
  if (body.contains("temperature")) {
    const json& t = body["temperature"];
    if (!t.is_number() || !(t.get<double>() > 0.0 && t.get<double>() <= 100.0))
      bad("temperature", "temperature must be a positive number less than or equal to 100.0");
    r.temperature = t.get<double>();
  }
  if (body.contains("top_k")) {
    const json& t = body["top_k"];
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > 1000)
      bad("top_k", "top_k must be equal to or greater than 0 and less than or equal to 1000");
    r.top_k = t.get<int64_t>();
  }
  if (body.contains("top_p")) {
    const json& t = body["top_p"];
    if (!t.is_number_float()) bad("top_p", "top_p must be a positive float less than or equal to 1.0");
    r.top_p = t.get<double>();
    if (r.top_p > 0.0 && r.top_k > 0) bad("top_p", "cannot set both top-k and top-p samplings.");
    if (!(r.top_p >= 0.0 && r.top_p <= 1.0)) bad("top_p", "top_p must be less than or equal to 1.0");
  }
  const bool add_bos = flag(body, "add_BOS");
  r.stop_on_eol = flag(body, "stop_on_eol");
  r.stop_on_double_eol = flag(body, "stop_on_double_eol");
  flag(body, "no_log");
  flag(body, "prevent_newline_after_colon");
  if (body.contains("random_seed")) {
    const json& s = body["random_seed"];
    if (!s.is_number_integer()) bad("random_seed", "random_seed must be integer");
    if (s.get<int64_t>() < 0) bad("random_seed", "random_seed must be a positive integer");
    r.random_seed = s.get<int64_t>();
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (!prompts[i].is_string()) bad("prompts", "prompts is not a list of strings");
    std::vector<int32_t> ids;
    if (add_bos) ids.push_back(tok.eod());
    tok.encode_to(prompts[i].get<std::string>(), ids);
    if (ids.empty()) bad("prompts", "Empty prompts require add_BOS=true");
    if (static_cast<int64_t>(ids.size()) + r.tokens_to_generate > seq_length)
      bad("tokens_to_generate", str("prompt ", i, " has ", ids.size(), " tokens; with tokens_to_generate ",
                                    r.tokens_to_generate, " it exceeds the model's sequence length ", seq_length));
    r.prompts.push_back(std::move(ids));
  }
  return r;
}

std::vector<RowSpec> megatron_rows(const MegatronRequest& req, uint64_t seed) {
  std::vector<RowSpec> rows;
  for (const auto& p : req.prompts) {
    RowSpec s;
    s.prompt = p;
    s.max_new = req.tokens_to_generate;
    s.temperature = req.top_k == 1 ? 0.0 : req.temperature;  // Megatron's greedy is top_k = 1
    s.top_k = req.top_k;
    s.top_p = req.top_p;
    s.seed = req.random_seed >= 0 ? static_cast<uint64_t>(req.random_seed) : seed;
    s.logprobs = req.logprobs;
    if (req.stop_on_double_eol) s.stop.push_back("\n\n");
    if (req.stop_on_eol) s.stop.push_back("\n");
    rows.push_back(std::move(s));
  }
  return rows;
}

json megatron_response(const MegatronRequest& req, const std::vector<RowResult>& rows, const data::Tokenizer& tok) {
  json text = json::array(), segments = json::array(), logprobs = req.logprobs ? json::array() : json(nullptr);
  for (const auto& r : rows) {
    text.push_back(data::sanitize_utf8(tok.decode(r.tokens)));
    json seg = json::array();
    for (int32_t id : r.tokens) seg.push_back(data::sanitize_utf8(tok.decode({id})));
    segments.push_back(std::move(seg));
    if (req.logprobs) logprobs.push_back(std::vector<float>(r.logprobs.begin() + 1, r.logprobs.end()));
  }
  return {{"text", std::move(text)}, {"segments", std::move(segments)}, {"logprobs", std::move(logprobs)}};
}

}  // namespace megaton::serve
