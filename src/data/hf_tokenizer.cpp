#include "data/hf_tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "data/byte_level.h"
#include "data/hf_hub_cache.h"
#include "data/utf8.h"

namespace megaton::data {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

enum class Behavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct PreStep {
  enum Kind { kByteLevel, kSplitRegex, kSplitString } kind;
  bool add_prefix_space = false;
  bool use_regex = true;  // ByteLevel
  Behavior behavior = Behavior::kIsolated;
  bool invert = false;
  std::string literal;   // kSplitString
  int regex_index = -1;  // into Shared::regexes (kSplitRegex and ByteLevel with use_regex)
};

// A normalizer step: Prepend (text non-empty: `text` before it) or Replace (every `from` by `text`).
struct NormStep {
  enum Kind { kPrepend, kReplace } kind;
  std::string from, text;
};

struct AddedToken {
  std::string content;
  int32_t id;
  bool lstrip, rstrip;
};

json read_json(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  MEGATON_CHECK(in.good(), DataError, "cannot open '", p.string(), "'");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw DataError(str(p.string(), ": not valid JSON: ", e.what()));
  }
}

bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

}  // namespace

struct HfTokenizer::Shared {
  std::string origin;
  std::unique_ptr<BpeModel> model;
  std::vector<std::unique_ptr<RegexSplitter>> regexes;
  Gpt2PreTokenizer gpt2_splitter;
  std::vector<PreStep> steps;
  std::vector<AddedToken> added;  // sorted longest first
  std::array<bool, 256> added_first_byte{};
  std::unordered_map<int32_t, std::string> decode_extra;  // added tokens and non-byte-level vocab entries
  std::vector<int32_t> prefix_ids, suffix_ids;            // TemplateProcessing single
  std::vector<NormStep> normalizers;                      // applied to the text between added tokens
  bool char_level = false;           // SentencePiece-style BPE over characters (no ByteLevel pre-tokenizer)
  std::vector<std::string> decoded;  // char_level: each vocabulary token as its decoder makes it
  std::string strip_content;         // char_level: the decoder's Strip (of the whole decoded text)
  size_t strip_start = 0, strip_stop = 0;
  int64_t vocab_size = 0;
  int32_t eod = -1;
  int32_t pad = -1;  // tokenizer_config.json's pad_token, or -1
};

namespace {

Behavior parse_behavior(const std::string& b, const std::string& origin) {
  if (b == "Isolated") return Behavior::kIsolated;
  if (b == "Removed") return Behavior::kRemoved;
  if (b == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::kMergedWithNext;
  if (b == "Contiguous") return Behavior::kContiguous;
  throw DataError(str(origin, ": pre_tokenizer Split behavior '", b, "' is not supported"));
}

void add_normalizer(HfTokenizer::Shared& s, const json& j) {
  const std::string type = j.value("type", "");
  if (type == "Sequence") {
    for (const auto& sub : j.at("normalizers")) add_normalizer(s, sub);
  } else if (type == "Prepend") {
    s.normalizers.push_back({NormStep::kPrepend, "", j.at("prepend").get<std::string>()});
  } else if (type == "Replace" && j.at("pattern").contains("String")) {
    const std::string from = j.at("pattern").at("String").get<std::string>();
    MEGATON_CHECK(!from.empty(), DataError, s.origin, ": normalizer Replace with an empty String pattern");
    s.normalizers.push_back({NormStep::kReplace, from, j.at("content").get<std::string>()});
  } else {
    throw DataError(str(s.origin, ": normalizer '", type, type == "Replace" ? "' with a Regex pattern" : "",
                        "' is not supported (supported: Prepend, Replace of a String, Sequence of those)"));
  }
}

// The byte a byte-fallback token names ("<0x0A>" -> 0x0A; hex digits of either case, as HF's ByteFallback decoder
// reads them), or -1.
int fallback_byte(const std::string& key) {
  if (key.size() != 6 || key.compare(0, 3, "<0x") != 0 || key[5] != '>') return -1;
  int v = 0;
  for (const char c : key.substr(3, 2)) {
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                         : -1;
    if (d < 0) return -1;
    v = 16 * v + d;
  }
  return v;
}

// A SentencePiece-style decoder (Llama-2's: Replace, ByteFallback, Fuse, Strip) into s.decoded and s.strip_*, given
// each vocabulary token's string.
void set_char_decoder(HfTokenizer::Shared& s, const json& j, const std::vector<std::string>& keys) {
  std::vector<std::pair<std::string, std::string>> replace;
  bool byte_fallback = false;
  std::vector<json> steps;
  if (j.value("type", "") == "Sequence") {
    for (const auto& d : j.at("decoders")) steps.push_back(d);
  } else if (!j.is_null()) {
    steps.push_back(j);
  }
  for (const json& d : steps) {
    const std::string type = d.value("type", "");
    if (type == "Replace" && d.at("pattern").contains("String")) {
      replace.emplace_back(d.at("pattern").at("String").get<std::string>(), d.at("content").get<std::string>());
    } else if (type == "ByteFallback") {
      byte_fallback = true;
    } else if (type == "Strip") {
      s.strip_content = d.value("content", " ");
      s.strip_start = d.value("start", size_t{0});
      s.strip_stop = d.value("stop", size_t{0});
    } else if (type != "Fuse") {
      throw DataError(str(s.origin, ": decoder '", type,
                          "' is not supported with a character-level BPE (supported: Replace, ByteFallback, Fuse, "
                          "Strip)"));
    }
  }
  s.decoded.resize(keys.size());
  for (size_t id = 0; id < keys.size(); ++id) {
    std::string t = keys[id];
    if (const int byte = byte_fallback ? fallback_byte(t) : -1; byte >= 0) {
      t = std::string(1, static_cast<char>(byte));
    } else {
      for (const auto& [from, to] : replace)
        for (size_t p = t.find(from); p != std::string::npos; p = t.find(from, p + to.size()))
          t.replace(p, from.size(), to);
    }
    s.decoded[id] = std::move(t);
  }
}

void add_pre_step(HfTokenizer::Shared& s, const json& j, bool& byte_level) {
  const std::string type = j.value("type", "");
  if (type == "Sequence") {
    for (const auto& sub : j.at("pretokenizers")) add_pre_step(s, sub, byte_level);
    return;
  }
  PreStep step{};
  if (type == "ByteLevel") {
    byte_level = true;
    step.kind = PreStep::kByteLevel;
    step.add_prefix_space = j.value("add_prefix_space", false);
    step.use_regex = j.value("use_regex", true);  // GPT-2's pattern: the Gpt2PreTokenizer scanner
  } else if (type == "Split") {
    const json& pat = j.at("pattern");
    step.behavior = parse_behavior(j.value("behavior", "Isolated"), s.origin);
    step.invert = j.value("invert", false);
    if (pat.contains("Regex")) {
      step.kind = PreStep::kSplitRegex;
      s.regexes.push_back(std::make_unique<RegexSplitter>(pat.at("Regex").get<std::string>(), s.origin + " Split"));
      step.regex_index = static_cast<int>(s.regexes.size()) - 1;
    } else {
      step.kind = PreStep::kSplitString;
      step.literal = pat.at("String").get<std::string>();
      MEGATON_CHECK(!step.literal.empty(), DataError, s.origin, ": Split with an empty String pattern");
    }
  } else {
    throw DataError(str(s.origin, ": pre_tokenizer type '", type,
                        "' is not supported (supported: ByteLevel, Split, Sequence; see docs/data.md)"));
  }
  s.steps.push_back(std::move(step));
}

// Splits `piece` at the [begin, end) matches according to `behavior` (HF SplitDelimiterBehavior), appending to out.
void apply_behavior(std::string_view piece, const std::vector<std::pair<size_t, size_t>>& matches, Behavior behavior,
                    bool invert, std::vector<std::string>& out) {
  struct Seg {
    size_t b, e;
    bool delim;
  };
  std::vector<Seg> segs;
  size_t pos = 0;
  for (const auto& [b, e] : matches) {
    if (b > pos) segs.push_back({pos, b, invert});
    segs.push_back({b, e, !invert});
    pos = e;
  }
  if (pos < piece.size()) segs.push_back({pos, piece.size(), invert});
  std::string pending;  // for MergedWithNext
  bool have_prev = false;
  for (size_t k = 0; k < segs.size(); ++k) {
    const Seg& g = segs[k];
    std::string_view t = piece.substr(g.b, g.e - g.b);
    switch (behavior) {
      case Behavior::kIsolated:
        out.emplace_back(t);
        break;
      case Behavior::kRemoved:
        if (!g.delim) out.emplace_back(t);
        break;
      case Behavior::kMergedWithPrevious:
        if (g.delim && have_prev) {
          out.back() += t;
        } else {
          out.emplace_back(t);
        }
        have_prev = true;
        break;
      case Behavior::kMergedWithNext:
        if (g.delim) {
          pending += t;
        } else {
          out.emplace_back(pending + std::string(t));
          pending.clear();
        }
        break;
      case Behavior::kContiguous:
        if (g.delim && k > 0 && segs[k - 1].delim) {
          out.back() += t;
        } else {
          out.emplace_back(t);
        }
        break;
    }
  }
  if (!pending.empty()) out.push_back(pending);
}

/// Token ids above this are refused: the vocabulary is stored densely by id, so one hostile id would allocate for
/// every id below it (real vocabularies stay below 2^18).
constexpr int64_t kMaxTokenId = int64_t{1} << 24;

}  // namespace

HfTokenizer::HfTokenizer(const std::string& path)
    : HfTokenizer([&]() -> std::shared_ptr<const Shared> {
        try {
          auto s = std::make_shared<Shared>();
          fs::path file = resolve_hf_name_or_path(path, [](const char* v) { return std::getenv(v); });
          fs::path sentencepiece;  // a SentencePiece model beside (or instead of) tokenizer.json
          if (fs::is_directory(file)) {
            for (const char* name : {"tokenizer.model", "spiece.model", "sentencepiece.bpe.model"})
              if (fs::exists(file / name)) sentencepiece = file / name;
            file /= "tokenizer.json";
          } else if (file.extension() == ".model") {
            sentencepiece = file;
          }
          MEGATON_CHECK(sentencepiece.empty() || (fs::exists(file) && file != sentencepiece), DataError,
                        "--tokenizer-name-or-path '", path, "': ", sentencepiece.string(),
                        " is a SentencePiece model; megaton reads the tokenizer.json a fast Hugging Face tokenizer "
                        "saves. Write one beside it with transformers: "
                        "AutoTokenizer.from_pretrained(DIR).save_pretrained(DIR)");
          MEGATON_CHECK(fs::exists(file), DataError, "--tokenizer-name-or-path '", path, "': no ", file.string());
          s->origin = file.string();
          const json j = read_json(file);
          MEGATON_CHECK(j.contains("model") && j["model"].is_object(), DataError, s->origin, ": no \"model\" object");
          const json& m = j["model"];
          MEGATON_CHECK(m.value("type", "BPE") == "BPE", DataError, s->origin, ": model type '", m.value("type", ""),
                        "' is not supported (only BPE: GPT-2, BLOOM, Llama; Unigram and WordPiece models, e.g. T5's "
                        "and BERT's, are not read)");
          MEGATON_CHECK(m.value("dropout", json()).is_null() || m["dropout"] == 0, DataError, s->origin,
                        ": BPE dropout is not supported");
          for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
            MEGATON_CHECK(!m.contains(k) || m[k].is_null() || m[k] == "", DataError, s->origin, ": BPE ", k,
                          " is not supported");
          const json& norm = j.value("normalizer", json());
          if (!norm.is_null()) add_normalizer(*s, norm);
          bool byte_level = false;
          if (j.contains("pre_tokenizer") && !j["pre_tokenizer"].is_null())
            add_pre_step(*s, j["pre_tokenizer"], byte_level);
          // Without a ByteLevel pre-tokenizer the BPE runs over characters, SentencePiece's way (Llama-2).
          s->char_level = !byte_level;
          MEGATON_CHECK(byte_level || m.value("byte_fallback", false) || m.contains("unk_token"), DataError, s->origin,
                        ": a BPE without a ByteLevel pre-tokenizer needs byte_fallback or an unk_token");

          // Vocabulary: byte-level keys -> raw bytes (character-level: the keys as they are).
          std::vector<std::string> tokens;
          std::string bytes;
          for (const auto& [key, value] : m.at("vocab").items()) {
            MEGATON_CHECK(value.is_number_integer() && value.get<int64_t>() >= 0 && value.get<int64_t>() < kMaxTokenId,
                          DataError, s->origin, ": vocab entry '", key, "' has the id ", value.dump(),
                          "; expected an integer in [0, ", kMaxTokenId, ")");
            const auto id = value.get<size_t>();
            if (tokens.size() <= id) tokens.resize(id + 1);
            if (s->char_level) {
              tokens[id] = key;
            } else if (byte_level_to_bytes(key, bytes)) {
              tokens[id] = bytes;
            } else {
              s->decode_extra[static_cast<int32_t>(id)] = key;
            }
          }
          std::vector<std::pair<std::string, std::string>> merges;
          std::string a, b;
          size_t k = 0;
          for (const auto& mj : m.at("merges")) {
            ++k;
            std::string l, r;
            if (mj.is_string()) {
              const std::string line = mj.get<std::string>();
              const auto sp = line.find(' ');
              MEGATON_CHECK(sp != std::string::npos && line.find(' ', sp + 1) == std::string::npos, DataError,
                            s->origin, ": merges[", k - 1, "] = '", line, "' is not 'left right'");
              l = line.substr(0, sp), r = line.substr(sp + 1);
            } else {
              MEGATON_CHECK(mj.is_array() && mj.size() == 2, DataError, s->origin, ": merges[", k - 1,
                            "] is not a pair");
              l = mj[0].get<std::string>(), r = mj[1].get<std::string>();
            }
            if (s->char_level) {
              merges.emplace_back(l, r);
              continue;
            }
            MEGATON_CHECK(byte_level_to_bytes(l, a) && byte_level_to_bytes(r, b), DataError, s->origin, ": merges[",
                          k - 1, "] is not byte-level");
            merges.emplace_back(a, b);
          }
          s->vocab_size = static_cast<int64_t>(tokens.size());
          BpeModel::CharLevel chars;
          chars.byte_fallback.fill(-1);
          if (s->char_level) {
            set_char_decoder(*s, j.value("decoder", json()), tokens);
            // One pass over the vocabulary: the byte tokens as the BPE model looks them up ("<0x0A>", upper case)
            // and the unknown token.
            const bool byte_fallback = m.value("byte_fallback", false);
            const json& unk = m.value("unk_token", json());
            char upper[8];
            for (size_t id = 0; id < tokens.size(); ++id) {
              const int byte = byte_fallback ? fallback_byte(tokens[id]) : -1;
              if (byte >= 0 && std::snprintf(upper, sizeof upper, "<0x%02X>", byte) > 0 && tokens[id] == upper)
                chars.byte_fallback[byte] = static_cast<int32_t>(id);
              if (unk.is_string() && tokens[id] == unk.get<std::string>()) chars.unk = static_cast<int32_t>(id);
            }
            chars.fuse_unk = m.value("fuse_unk", false);
          }
          s->model = std::make_unique<BpeModel>(std::move(tokens), merges, s->origin, m.value("ignore_merges", false),
                                                s->char_level ? &chars : nullptr);

          // Added tokens.
          std::unordered_map<std::string, int32_t> by_content;
          for (const auto& t : j.value("added_tokens", json::array())) {
            const int64_t id = t.at("id").get<int64_t>();
            MEGATON_CHECK(id >= 0 && id < kMaxTokenId, DataError, s->origin, ": added token ", t.dump(), " has the id ",
                          id, "; expected an integer in [0, ", kMaxTokenId, ")");
            AddedToken at{t.at("content").get<std::string>(), static_cast<int32_t>(id), t.value("lstrip", false),
                          t.value("rstrip", false)};
            MEGATON_CHECK(!at.content.empty(), DataError, s->origin, ": an added token has empty content");
            by_content[at.content] = at.id;
            s->decode_extra[at.id] = at.content;
            s->vocab_size = std::max<int64_t>(s->vocab_size, at.id + 1);
            s->added_first_byte[static_cast<unsigned char>(at.content[0])] = true;
            s->added.push_back(std::move(at));
          }
          std::stable_sort(s->added.begin(), s->added.end(), [](const AddedToken& x, const AddedToken& y) {
            return x.content.size() > y.content.size();
          });

          // Post-processor.
          const json& pp = j.value("post_processor", json());
          if (!pp.is_null()) {
            const std::string type = pp.value("type", "");
            if (type == "TemplateProcessing") {
              bool seen_a = false;
              for (const auto& piece : pp.at("single")) {
                if (piece.contains("Sequence")) {
                  seen_a = true;
                } else {
                  const std::string name = piece.at("SpecialToken").at("id").get<std::string>();
                  const json& st = pp.at("special_tokens").at(name);
                  for (const auto& id : st.at("ids"))
                    (seen_a ? s->suffix_ids : s->prefix_ids).push_back(id.get<int32_t>());
                }
              }
            } else if (type != "ByteLevel") {
              throw DataError(str(s->origin, ": post_processor '", type,
                                  "' is not supported (null, ByteLevel, TemplateProcessing)"));
            }
          }

          // End of document: tokenizer_config.json's eos_token, else a known end-of-text token.
          std::string eos, pad;
          const fs::path cfg = file.parent_path() / "tokenizer_config.json";
          if (fs::exists(cfg)) {
            const json c = read_json(cfg);
            const auto token = [&](const char* key) {
              if (!c.contains(key) || c[key].is_null()) return std::string();
              const json& e = c[key];
              return e.is_string() ? e.get<std::string>() : e.value("content", "");
            };
            eos = token("eos_token");
            pad = token("pad_token");
          }
          if (eos.empty())
            for (const char* cand : {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<|im_end|>"})
              if (by_content.count(cand)) {
                eos = cand;
                break;
              }
          if (!eos.empty()) {
            if (by_content.count(eos)) {
              s->eod = by_content[eos];
            } else {
              const int32_t id = s->model->find(eos);
              s->eod = id;
            }
          }
          if (!pad.empty()) s->pad = by_content.count(pad) ? by_content[pad] : s->model->find(pad);
          return std::shared_ptr<const Shared>(std::move(s));
        } catch (const json::exception& e) {
          // A key missing or of the wrong type anywhere in the file: a data error naming it, never an internal one.
          throw DataError(str("--tokenizer-name-or-path '", path, "': malformed tokenizer.json (", e.what(), ")"));
        }
      }()) {}

HfTokenizer::HfTokenizer(std::shared_ptr<const Shared> s) : shared_(std::move(s)) {
  for (const auto& re : shared_->regexes) matchers_.push_back(std::make_unique<RegexSplitter::Matcher>(*re));
}

std::unique_ptr<Tokenizer> HfTokenizer::clone() const {
  return std::unique_ptr<Tokenizer>(new HfTokenizer(shared_));
}

int64_t HfTokenizer::vocab_size() const {
  return shared_->vocab_size;
}

int32_t HfTokenizer::pad() const {
  MEGATON_CHECK(shared_->pad >= 0, DataError, shared_->origin,
                ": no padding token (no pad_token in tokenizer_config.json, or one the vocabulary lacks)");
  return shared_->pad;
}

int32_t HfTokenizer::eod() const {
  MEGATON_CHECK(shared_->eod >= 0, DataError, shared_->origin,
                ": no end-of-document token (no eos_token in tokenizer_config.json and no known end-of-text token)");
  return shared_->eod;
}

void HfTokenizer::encode_to(std::string_view text, std::vector<int32_t>& out) {
  std::string fixed;
  if (!is_valid_utf8(text)) {
    fixed = sanitize_utf8(text);
    text = fixed;
  }
  const Shared& s = *shared_;
  out.insert(out.end(), s.prefix_ids.begin(), s.prefix_ids.end());
  size_t seg_begin = 0;
  size_t i = 0;
  while (i < text.size()) {
    const AddedToken* hit = nullptr;
    if (s.added_first_byte[static_cast<unsigned char>(text[i])]) {
      for (const AddedToken& t : s.added)
        if (text.compare(i, t.content.size(), t.content) == 0) {
          hit = &t;
          break;
        }
    }
    if (!hit) {
      ++i;
      continue;
    }
    size_t left = i, right = i + hit->content.size();
    if (hit->lstrip)
      while (left > seg_begin && is_ws(text[left - 1])) --left;
    if (hit->rstrip)
      while (right < text.size() && is_ws(text[right])) ++right;
    encode_segment(text.substr(seg_begin, left - seg_begin), out);
    out.push_back(hit->id);
    seg_begin = i = right;
  }
  encode_segment(text.substr(seg_begin), out);
  out.insert(out.end(), s.suffix_ids.begin(), s.suffix_ids.end());
}

void HfTokenizer::encode_segment(std::string_view text, std::vector<int32_t>& out) {
  if (text.empty()) return;
  const Shared& s = *shared_;
  pieces_.assign(1, std::string(text));
  for (const NormStep& n : s.normalizers) {
    std::string& t = pieces_[0];
    if (n.kind == NormStep::kPrepend) {
      if (!t.empty()) t.insert(0, n.text);
    } else {
      for (size_t p = t.find(n.from); p != std::string::npos; p = t.find(n.from, p + n.text.size()))
        t.replace(p, n.from.size(), n.text);
    }
  }
  std::vector<std::pair<size_t, size_t>> matches;
  for (const PreStep& step : s.steps) {
    next_pieces_.clear();
    for (std::string& piece : pieces_) {
      if (step.kind == PreStep::kByteLevel) {
        if (step.add_prefix_space && (piece.empty() || piece[0] != ' ')) piece.insert(piece.begin(), ' ');
        if (!step.use_regex) {
          next_pieces_.push_back(std::move(piece));
          continue;
        }
      }
      matches.clear();
      if (step.kind == PreStep::kByteLevel) {
        for (size_t pos = 0; pos < piece.size();) {
          const size_t end = s.gpt2_splitter.next(piece, pos);
          matches.emplace_back(pos, end);
          pos = end;
        }
      } else if (step.kind == PreStep::kSplitString) {
        for (size_t p = piece.find(step.literal); p != std::string::npos;
             p = piece.find(step.literal, p + step.literal.size()))
          matches.emplace_back(p, p + step.literal.size());
      } else {
        auto& matcher = *matchers_[static_cast<size_t>(step.regex_index)];
        size_t pos = 0, b = 0, e = 0;
        while (pos <= piece.size() && matcher.find(piece, pos, b, e)) {
          if (e == b) {  // empty match: step over one code point
            if (b >= piece.size()) break;
            size_t n = b;
            next_code_point(piece, n);
            pos = n;
            continue;
          }
          matches.emplace_back(b, e);
          pos = e;
        }
      }
      // ByteLevel's regex keeps every piece (GPT-2 pattern covers all text): Isolated.
      apply_behavior(piece, matches, step.kind == PreStep::kByteLevel ? Behavior::kIsolated : step.behavior,
                     step.kind == PreStep::kByteLevel ? false : step.invert, next_pieces_);
    }
    pieces_.swap(next_pieces_);
  }
  for (const std::string& piece : pieces_) {
    if (piece.empty()) continue;
    if (s.char_level) {
      s.model->encode_word(piece, out);  // whole segments: too many distinct ones to cache
    } else {
      cache_.encode_word(*s.model, piece, out);
    }
  }
}

std::string HfTokenizer::decode(const std::vector<int32_t>& ids) const {
  const Shared& s = *shared_;
  std::string out;
  for (int32_t id : ids) {
    const auto it = s.decode_extra.find(id);
    if (it != s.decode_extra.end()) {
      out += it->second;
      continue;
    }
    MEGATON_CHECK(id >= 0 && static_cast<size_t>(id) < s.model->size() && !s.model->token_bytes(id).empty(), DataError,
                  "decode: token id ", id, " is not in ", s.origin);
    out += s.char_level ? s.decoded[static_cast<size_t>(id)] : s.model->token_bytes(id);
  }
  if (s.char_level && !s.strip_content.empty()) {  // the decoder's Strip of the fused text
    for (size_t k = 0; k < s.strip_start && out.compare(0, s.strip_content.size(), s.strip_content) == 0; ++k)
      out.erase(0, s.strip_content.size());
    for (size_t k = 0; k < s.strip_stop && out.size() >= s.strip_content.size() &&
                       out.compare(out.size() - s.strip_content.size(), s.strip_content.size(), s.strip_content) == 0;
         ++k)
      out.erase(out.size() - s.strip_content.size());
  }
  return out;
}

}  // namespace megaton::data
