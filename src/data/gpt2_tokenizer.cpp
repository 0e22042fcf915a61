#include "data/gpt2_tokenizer.h"

#include <fstream>
#include <nlohmann/json.hpp>
#ifdef MEGATON_HAVE_SIMDJSON
#include <simdjson.h>
#endif
#include <sstream>

#include "core/error.h"
#include "data/byte_level.h"
#include "data/utf8.h"

namespace megaton::data {

namespace {

std::string read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  MEGATON_CHECK(in.good(), DataError, "cannot open ", what, " '", path, "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::vector<std::string> read_gpt2_vocab(const std::string& path, int32_t* eod) {
  const std::string text = read_file(path, "--vocab-file");
  std::vector<std::pair<std::string, int64_t>> entries;
#ifdef MEGATON_HAVE_SIMDJSON
  simdjson::dom::parser parser;
  simdjson::dom::object obj;
  const auto err = parser.parse(text).get(obj);
  MEGATON_CHECK(!err, DataError, path, ": not a JSON object (", simdjson::error_message(err),
                "); expected GPT-2 vocab.json {\"token\": id, ...}");
  entries.reserve(obj.size());
  for (auto field : obj) {
    int64_t id = -1;
    MEGATON_CHECK(!field.value.get_int64().get(id), DataError, path, ": token '", std::string(field.key),
                  "' has a non-integer id; expected {\"token\": id, ...}");
    entries.emplace_back(std::string(field.key), id);
  }
#else
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(str(path, ": not valid JSON (", e.what(), "); expected GPT-2 vocab.json {\"token\": id, ...}"));
  }
  MEGATON_CHECK(j.is_object(), DataError, path, ": expected a JSON object {\"token\": id, ...}");
  for (const auto& [key, value] : j.items()) {
    MEGATON_CHECK(value.is_number_integer(), DataError, path, ": token '", key, "' has id ", value.dump(),
                  "; expected an integer");
    entries.emplace_back(key, value.get<int64_t>());
  }
#endif
  MEGATON_CHECK(!entries.empty(), DataError, path, ": empty vocabulary");
  std::vector<std::string> tokens;
  std::string bytes;
  *eod = -1;
  for (const auto& [key, id64] : entries) {
    MEGATON_CHECK(id64 >= 0 && id64 < (1 << 24), DataError, path, ": token '", key, "' has id ", id64,
                  "; expected a non-negative integer below 2^24");
    const auto id = static_cast<size_t>(id64);
    MEGATON_CHECK(byte_level_to_bytes(key, bytes), DataError, path, ": token '", key,
                  "' is not in GPT-2's byte-level alphabet");
    if (tokens.size() <= id) tokens.resize(id + 1);
    MEGATON_CHECK(tokens[id].empty(), DataError, path, ": id ", id, " is used twice");
    tokens[id] = bytes;
    if (key == "<|endoftext|>") *eod = static_cast<int32_t>(id);
  }
  return tokens;
}

std::vector<std::pair<std::string, std::string>> read_gpt2_merges(const std::string& path) {
  std::istringstream in(read_file(path, "--merge-file"));
  std::vector<std::pair<std::string, std::string>> merges;
  std::string line, a, b, ab, bb;
  size_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (lineno == 1 && line.rfind("#", 0) == 0) continue;  // "#version: 0.2"
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    MEGATON_CHECK(
        sp != std::string::npos && sp > 0 && sp + 1 < line.size() && line.find(' ', sp + 1) == std::string::npos,
        DataError, path, ":", lineno, ": expected two tokens 'left right', got '", line, "'");
    a.assign(line, 0, sp);
    b.assign(line, sp + 1, std::string::npos);
    MEGATON_CHECK(byte_level_to_bytes(a, ab) && byte_level_to_bytes(b, bb), DataError, path, ":", lineno, ": '", line,
                  "' is not in GPT-2's byte-level alphabet");
    merges.emplace_back(ab, bb);
  }
  MEGATON_CHECK(!merges.empty(), DataError, path, ": no merges found; expected GPT-2 merges.txt / vocab.bpe");
  return merges;
}

Gpt2Tokenizer::Gpt2Tokenizer(const std::string& vocab_file, const std::string& merge_file)
    : Gpt2Tokenizer([&] {
        int32_t eod = -1;
        auto tokens = read_gpt2_vocab(vocab_file, &eod);
        MEGATON_CHECK(eod >= 0, DataError, vocab_file, ": no '<|endoftext|>' token (needed as end-of-document)");
        auto merges = read_gpt2_merges(merge_file);
        return std::make_shared<const Shared>(BpeModel(std::move(tokens), merges, vocab_file + " + " + merge_file),
                                              eod);
      }()) {}

Gpt2Tokenizer::Gpt2Tokenizer(std::shared_ptr<const Shared> s) : shared_(std::move(s)) {}

std::unique_ptr<Tokenizer> Gpt2Tokenizer::clone() const {
  return std::unique_ptr<Tokenizer>(new Gpt2Tokenizer(shared_));
}

void Gpt2Tokenizer::encode_to(std::string_view text, std::vector<int32_t>& out) {
  std::string fixed;
  if (!is_valid_utf8(text)) {
    fixed = sanitize_utf8(text);
    text = fixed;
  }
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = shared_->splitter.next(text, pos);
    cache_.encode_word(shared_->model, text.substr(pos, end - pos), out);
    pos = end;
  }
}

std::string Gpt2Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    MEGATON_CHECK(id >= 0 && static_cast<size_t>(id) < shared_->model.size(), DataError, "decode: token id ", id,
                  " is outside the vocabulary [0, ", shared_->model.size(), ")");
    out += shared_->model.token_bytes(id);
  }
  return out;
}

}  // namespace megaton::data
