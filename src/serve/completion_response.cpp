#include "serve/completion_response.h"

#include <cmath>
#include <cstdio>

#include "data/utf8.h"

namespace megaton::serve {

using json = nlohmann::json;

namespace {

// Characters (code points) in the first `bytes` bytes of `s`: its bytes that are not continuation bytes.
int64_t chars_in(const std::string& s, size_t bytes) {
  int64_t n = 0;
  for (size_t i = 0; i < bytes && i < s.size(); ++i) n += (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80;
  return n;
}

// A token's text as OpenAI shows it: its bytes `s`, or "bytes:\xNN..." when they are not valid UTF-8 alone.
std::string token_text(const std::string& s) {
  if (data::is_valid_utf8(s)) return s;
  std::string out = "bytes:";
  char buf[8];
  for (unsigned char c : s) {
    std::snprintf(buf, sizeof(buf), "\\x%02x", c);
    out += buf;
  }
  return out;
}

// The longest prefix of s[0:end) that does not end inside a UTF-8 sequence.
size_t complete_utf8(const std::string& s, size_t end) {
  size_t i = end;
  int back = 0;
  while (i > 0 && back < 3 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) --i, ++back;
  if (i == 0) return end;
  const unsigned char lead = static_cast<unsigned char>(s[i - 1]);
  const size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  return (end - (i - 1) >= need) ? end : i - 1;
}

}  // namespace

ChoiceView view_row(const RowResult& r, const data::Tokenizer& tok, const CompletionRequest& req, bool done) {
  ChoiceView v;
  const int64_t n = static_cast<int64_t>(r.tokens.size());
  const int64_t text_end = (r.finish == Finish::kEos && n > r.prompt_len) ? n - 1 : n;  // the EOS is not text
  std::string prompt;
  if (req.echo) prompt = tok.decode(std::vector<int32_t>(r.tokens.begin(), r.tokens.begin() + r.prompt_len));
  std::string completion =
      tok.decode(std::vector<int32_t>(r.tokens.begin() + r.prompt_len, r.tokens.begin() + text_end));
  const size_t cut = find_stop(completion, req.stop);
  if (cut != std::string::npos) {
    completion.resize(cut);
    v.finish_reason = "stop";
  } else if (done) {
    v.finish_reason = r.finish == Finish::kLength ? "length" : "stop";
  }
  v.completion_from = prompt.size();
  v.text = prompt + completion;

  if (!req.logprobs || r.logprobs.empty()) return v;
  // Offsets: characters into prompt + completion (without echo, the first completion token's offset is the
  // prompt's length, as OpenAI reports it).
  const std::string prompt_text =
      req.echo ? prompt : tok.decode(std::vector<int32_t>(r.tokens.begin(), r.tokens.begin() + r.prompt_len));
  size_t bytes = 0;    // of the tokens' texts so far
  int64_t offset = 0;  // their characters
  for (int64_t i = 0; i < n; ++i) {
    const bool in_prompt = i < r.prompt_len;
    const std::string piece = tok.decode({r.tokens[i]});
    if (!in_prompt && cut != std::string::npos && bytes >= prompt_text.size() + cut) break;
    if (!in_prompt || req.echo) {
      v.tokens.push_back(token_text(piece));
      v.text_offset.push_back(offset);
      v.token_logprobs.push_back(r.logprobs[i]);
      json top = i == 0 ? json(nullptr) : json::object();  // the first token has no context
      if (i > 0) {
        for (const auto& [id, lp] : r.top[i]) {
          const std::string t = token_text(tok.decode({id}));
          if (!top.contains(t)) top[t] = lp;
        }
      }
      v.top_logprobs.push_back(std::move(top));
    }
    bytes += piece.size();
    offset += chars_in(piece, piece.size());
  }
  return v;
}

json choice_json(const ChoiceView& v, int64_t index, bool with_logprobs, size_t text_from, size_t token_from,
                 bool finished) {
  json c;
  c["text"] = v.text.substr(std::min(text_from, v.text.size()));
  c["index"] = index;
  if (with_logprobs) {
    json lp;
    auto slice = [&](const auto& vec) {
      json a = json::array();
      for (size_t i = token_from; i < vec.size(); ++i) a.push_back(vec[i]);
      return a;
    };
    lp["tokens"] = slice(v.tokens);
    json tl = json::array();
    for (size_t i = token_from; i < v.token_logprobs.size(); ++i)
      tl.push_back(std::isnan(v.token_logprobs[i]) ? json(nullptr) : json(v.token_logprobs[i]));
    lp["token_logprobs"] = std::move(tl);
    lp["top_logprobs"] = slice(v.top_logprobs);
    lp["text_offset"] = slice(v.text_offset);
    c["logprobs"] = std::move(lp);
  } else {
    c["logprobs"] = nullptr;
  }
  c["finish_reason"] = finished && !v.finish_reason.empty() ? json(v.finish_reason) : json(nullptr);
  return c;
}

json usage_json(const std::vector<RowResult>& rows) {
  int64_t prompt = 0, completion = 0;
  for (const auto& r : rows) {
    prompt += r.prompt_len;
    completion += r.generated();
  }
  return {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
}

json completion_json(const CompletionRequest& req, const std::vector<RowResult>& rows, const data::Tokenizer& tok,
                     const std::string& id, int64_t created, const std::string& model) {
  json choices = json::array();
  for (size_t i = 0; i < rows.size(); ++i) {
    ChoiceView v = view_row(rows[i], tok, req, true);
    v.text = data::sanitize_utf8(v.text);
    choices.push_back(choice_json(v, static_cast<int64_t>(i), req.logprobs.has_value()));
  }
  return {{"id", id},       {"object", "text_completion"},   {"created", created},
          {"model", model}, {"choices", std::move(choices)}, {"usage", usage_json(rows)}};
}

json ChoiceStream::next(const RowResult& r, const data::Tokenizer& tok, bool done) {
  if (finished_) return nullptr;
  ChoiceView v = view_row(r, tok, req_, done);
  const bool final = done || !v.finish_reason.empty();
  size_t safe = v.text.size();
  if (!final) {
    const size_t longest = longest_stop(req_.stop);
    const size_t hold = longest > 0 ? longest - 1 : 0;  // a stop string may be forming at the end
    safe = std::max(v.completion_from, safe >= hold ? safe - hold : 0);
    safe = complete_utf8(v.text, safe);
  }
  size_t tokens_to = v.tokens.size();
  if (!final) {
    const int64_t safe_chars = chars_in(v.text, safe);
    while (tokens_to > tokens_sent_ && v.text_offset[tokens_to - 1] >= safe_chars) --tokens_to;
  }
  if (!final && safe <= text_sent_ && tokens_to <= tokens_sent_) return nullptr;
  v.text = data::sanitize_utf8(v.text.substr(0, safe));
  v.tokens.resize(tokens_to);
  v.token_logprobs.resize(tokens_to);
  v.top_logprobs.resize(tokens_to);
  v.text_offset.resize(tokens_to);
  json c = choice_json(v, index_, req_.logprobs.has_value(), text_sent_, tokens_sent_, final);
  text_sent_ = v.text.size();
  tokens_sent_ = tokens_to;
  finished_ = final;
  return c;
}

std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_event(const json& j) {
  return "data: " + dump_json(j) + "\n\n";
}

}  // namespace megaton::serve
