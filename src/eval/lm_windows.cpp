#include "eval/lm_windows.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "data/utf8.h"

namespace megaton::eval {

namespace {

// Python's str.strip() whitespace for the ASCII/C0 range (what WikiText contains).
bool py_space(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f');
}

std::string strip(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && py_space(s[b])) ++b;
  while (e > b && py_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

}  // namespace

int64_t count_space_separated(const std::string& text) {
  const std::string s = strip(text);
  int64_t n = 1;
  for (char c : s) n += c == ' ';
  return n;
}

RawText read_raw_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  MEGATON_CHECK(in.good(), DataError, "--valid-data ", path, ": cannot open the file");
  std::ostringstream ss;
  ss << in.rdbuf();
  RawText r;
  r.text = ss.str();
  MEGATON_CHECK(!strip(r.text).empty(), DataError, "--valid-data ", path, ": the file is empty");
  if (!data::is_valid_utf8(r.text)) {
    size_t at = 0;
    while (at < r.text.size()) {
      const auto lead = static_cast<unsigned char>(r.text[at]);
      const size_t n = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
      if (!data::is_valid_utf8(std::string_view(r.text).substr(at, n))) break;
      at += n;
    }
    throw DataError(str("--valid-data ", path, ": invalid UTF-8 at byte offset ", at));
  }
  r.num_original_tokens = count_space_separated(r.text);
  return r;
}

LmWindows::LmWindows(std::vector<int32_t> tokens, int64_t seq_len, int32_t pad_id, int64_t stride)
    : tokens_(std::move(tokens)), seq_len_(seq_len), stride_(stride <= 0 ? seq_len : stride), pad_(pad_id) {
  MEGATON_CHECK(seq_len_ > 0, UsageError, "--seq-length must be > 0");
  stride_ = std::max<int64_t>(1, stride_);
  MEGATON_CHECK(tokens_.size() >= 2, DataError, "the evaluation text has ", tokens_.size(),
                " token(s); at least 2 are needed to score one");
  const int64_t total_targets = static_cast<int64_t>(tokens_.size()) - 1;
  const int64_t targets = std::max<int64_t>(total_targets - stride_, 0);
  num_windows_ = std::max<int64_t>((targets + stride_ - 1) / stride_ + 1, 1);  // ceil(targets / stride) + 1
}

Window LmWindows::window(int64_t i) const {
  MEGATON_ASSERT(i >= 0 && i < num_windows_, "window ", i, " of ", num_windows_);
  const int64_t start = i * stride_;
  const int64_t end = std::min<int64_t>(start + seq_len_ + 1, static_cast<int64_t>(tokens_.size()));
  Window w;
  w.tokens.assign(tokens_.begin() + start, tokens_.begin() + end);
  std::vector<uint8_t> pad_mask(w.tokens.size(), 1);
  pad_mask.resize(seq_len_ + 1, 0);
  w.tokens.resize(seq_len_ + 1, pad_);
  w.mask.assign(pad_mask.begin() + 1, pad_mask.end());  // [seq_len]
  if (stride_ != seq_len_ && i != 0) {
    // pad_mask[:-stride] *= 0 (Python: nothing when stride >= seq_len)
    const int64_t keep_from = std::max<int64_t>(seq_len_ - stride_, 0);
    for (int64_t j = 0; j < keep_from; ++j) w.mask[j] = 0;
  }
  return w;
}

LambadaSet read_lambada(const std::string& path, data::Tokenizer& tok, bool strict, int64_t seq_len, int32_t pad_id) {
  std::ifstream in(path, std::ios::binary);
  MEGATON_CHECK(in.good(), DataError, "--valid-data ", path, ": cannot open the file");
  LambadaSet set;
  std::string line;
  int64_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    const std::string where = str(path, ":", lineno);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (strip(line).empty()) {
      ++set.skipped_blank;
      continue;
    }
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw DataError(str(where, ": not a JSON object (", e.what(), "); LAMBADA lines are {\"text\": \"...\"}"));
    }
    MEGATON_CHECK(j.is_object() && j.contains("text") && j["text"].is_string(), DataError, where,
                  ": expected a JSON object with a string \"text\" field, got ", j.dump().substr(0, 80));
    const std::string text = j["text"].get<std::string>();
    std::vector<int32_t> context, target;
    if (!strict) {
      std::vector<int32_t> toks = tok.encode(text);
      MEGATON_CHECK(toks.size() >= 2, DataError, where, ": the text has ", toks.size(),
                    " token(s); a context and a last token are needed");
      target.push_back(toks.back());
      toks.pop_back();
      context = std::move(toks);
    } else {
      // last_word = text.split()[-1]
      size_t e = text.size();
      while (e > 0 && py_space(text[e - 1])) --e;
      size_t b = e;
      while (b > 0 && !py_space(text[b - 1])) --b;
      MEGATON_CHECK(e > b, DataError, where, ": the text has no word to predict");
      const std::string last_word = text.substr(b, e - b);
      const size_t start = text.rfind(last_word);
      context = tok.encode(strip(text.substr(0, start)));
      target = tok.encode(" " + last_word);
    }
    MEGATON_CHECK(!context.empty(), DataError, where, ": the context before the last word is empty");
    const int64_t n = static_cast<int64_t>(context.size() + target.size());
    MEGATON_CHECK(n <= seq_len + 1, DataError, where, ": the example has ", n, " tokens, more than --seq-length + 1 (",
                  seq_len + 1, ")");
    Window w;
    std::vector<uint8_t> pad_mask(context.size(), 0);
    pad_mask.resize(n, 1);
    pad_mask.resize(seq_len + 1, 0);
    w.tokens = context;
    w.tokens.insert(w.tokens.end(), target.begin(), target.end());
    w.tokens.resize(seq_len + 1, pad_id);
    w.mask.assign(pad_mask.begin() + 1, pad_mask.end());
    set.examples.push_back(std::move(w));
  }
  MEGATON_CHECK(!set.examples.empty(), DataError, "--valid-data ", path, ": no LAMBADA examples in the file");
  return set;
}

}  // namespace megaton::eval
