// The preprocess pipeline on a tiny byte-level tokenizer.json written by the test: output equals tokenizing each
// line, worker count does not change a byte, compressed inputs, malformed lines (file:line or skipped and counted),
// empty texts, and no output pair after a failure.
#include "data/preprocess.h"

#include <gtest/gtest.h>
#include <lzma.h>
#include <zlib.h>

#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/remove_tree.h"
#include "data/byte_level.h"
#include "data/data_test_util.h"
#include "data/hf_tokenizer.h"
#include "data/indexed_dataset.h"
#include "data/json_line.h"

namespace megaton::data {
namespace {

// 256 byte tokens, a few merges, and an <eos> added token.
std::string tiny_tokenizer_json() {
  nlohmann::json vocab = nlohmann::json::object();
  int id = 0;
  for (int b = 0; b < 256; ++b) vocab[bytes_to_byte_level(std::string(1, static_cast<char>(b)))] = id++;
  std::vector<std::string> merges = {"t h", "th e", "\xC4\xA0 the", "a n", "an d"};  // "Ġ the" -> "Ġthe"
  for (const auto& m :
       {std::string("th"), std::string("the"), std::string("\xC4\xA0the"), std::string("an"), std::string("and")})
    vocab[m] = id++;
  nlohmann::json j = {{"version", "1.0"},
                      {"added_tokens",
                       {{{"id", id},
                         {"content", "<eos>"},
                         {"special", true},
                         {"lstrip", false},
                         {"rstrip", false},
                         {"normalized", false},
                         {"single_word", false}}}},
                      {"normalizer", nullptr},
                      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
                      {"post_processor", {{"type", "ByteLevel"}}},
                      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
  return j.dump();
}

struct Fixture {
  std::filesystem::path dir;
  std::unique_ptr<Tokenizer> tok;
  Fixture() : dir(testing::scratch_dir("pre")) {
    testing::write_file(dir / "tokenizer.json", tiny_tokenizer_json());
    testing::write_file(dir / "tokenizer_config.json", R"({"eos_token": "<eos>"})");
    tok = make_tokenizer("PretrainedFromHF", "", "", dir.string());
  }
  ~Fixture() { megaton::remove_tree(dir); }
};

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string corpus(int n) {
  std::string s;
  for (int i = 0; i < n; ++i)
    s += nlohmann::json(
             {{"text", "the cat and the dog number " + std::to_string(i) + std::string(i % 7, '!')}, {"meta", i}})
             .dump() +
         "\n";
  return s;
}

TEST(DataPreprocess, OutputIsTokenizedLinesAndIndependentOfWorkers) {
  Fixture f;
  EXPECT_EQ(f.tok->encode("the"), (std::vector<int32_t>{257}));
  EXPECT_EQ(f.tok->encode(" the"), (std::vector<int32_t>{258}));
  EXPECT_EQ(f.tok->eod(), 261);
  const std::string text = corpus(3000);
  testing::write_file(f.dir / "in.jsonl", text);
  const Logger log(0, 1, LogLevel::kWarning);
  PreprocessOptions o;
  o.input = (f.dir / "in.jsonl").string();
  o.append_eod = true;
  o.chunk_bytes = 4096;  // many chunks, so ordering across workers matters
  o.output_prefix = (f.dir / "w1").string();
  o.workers = 1;
  const PreprocessStats s1 = preprocess_jsonl(o, *f.tok, log);
  o.output_prefix = (f.dir / "w3").string();
  o.workers = 3;
  preprocess_jsonl(o, *f.tok, log);
  EXPECT_EQ(s1.documents, 3000);
  EXPECT_EQ(slurp(f.dir / "w1_text_document.bin"), slurp(f.dir / "w3_text_document.bin"));
  EXPECT_EQ(slurp(f.dir / "w1_text_document.idx"), slurp(f.dir / "w3_text_document.idx"));
  const MMapIndexedDataset ds((f.dir / "w1_text_document").string());
  ASSERT_EQ(ds.size(), 3000u);
  EXPECT_EQ(ds.dtype(), kUInt16);
  for (size_t i : {size_t(0), size_t(1234), size_t(2999)}) {
    auto want = f.tok->encode("the cat and the dog number " + std::to_string(i) + std::string(i % 7, '!'));
    want.push_back(261);
    const auto got = ds.get(i);
    EXPECT_EQ(std::vector<int64_t>(want.begin(), want.end()), got) << "doc " << i;
  }
}

TEST(DataPreprocess, ReadsGzipAndXz) {
  Fixture f;
  const std::string text = corpus(500);
  testing::write_file(f.dir / "in.jsonl", text);
  gzFile gz = gzopen((f.dir / "in.jsonl.gz").c_str(), "wb");
  gzwrite(gz, text.data(), static_cast<unsigned>(text.size()));
  gzclose(gz);
  std::vector<uint8_t> xz(text.size() + 1024);
  size_t xz_len = 0;
  ASSERT_EQ(lzma_easy_buffer_encode(6, LZMA_CHECK_CRC64, nullptr, reinterpret_cast<const uint8_t*>(text.data()),
                                    text.size(), xz.data(), &xz_len, xz.size()),
            LZMA_OK);
  testing::write_file(f.dir / "in.jsonl.xz", std::string(reinterpret_cast<char*>(xz.data()), xz_len));
  const Logger log(0, 1, LogLevel::kWarning);
  for (const char* name : {"in.jsonl", "in.jsonl.gz", "in.jsonl.xz"}) {
    PreprocessOptions o;
    o.input = (f.dir / name).string();
    o.output_prefix = (f.dir / (std::string("o_") + name)).string();
    o.workers = 2;
    const auto s = preprocess_jsonl(o, *f.tok, log);
    EXPECT_EQ(s.documents, 500) << name;
    EXPECT_EQ(s.bytes, text.size()) << name;
  }
  EXPECT_EQ(slurp(f.dir / "o_in.jsonl_text_document.bin"), slurp(f.dir / "o_in.jsonl.gz_text_document.bin"));
  EXPECT_EQ(slurp(f.dir / "o_in.jsonl_text_document.bin"), slurp(f.dir / "o_in.jsonl.xz_text_document.bin"));
}

/// corpus(n) with some lines (0-based) replaced, written to dir/name.
void write_corpus_with(const std::filesystem::path& file, int n, const std::map<size_t, std::string>& replace) {
  const std::string text = corpus(n);
  std::vector<std::string> lines;
  for (size_t p = 0, q; (q = text.find('\n', p)) != std::string::npos; p = q + 1)
    lines.push_back(text.substr(p, q - p));
  for (const auto& [i, line] : replace) lines[i] = line;
  std::string joined;
  for (const auto& l : lines) joined += l + "\n";
  testing::write_file(file, joined);
}

/// Options reading dir/input into dir/out with 2 workers.
PreprocessOptions jsonl_options(const std::filesystem::path& dir, const std::string& input) {
  PreprocessOptions o;
  o.input = (dir / input).string();
  o.output_prefix = (dir / "out").string();
  o.workers = 2;
  return o;
}

/// The DataError preprocess_jsonl throws for `o` ("" when none).
std::string preprocess_error(const PreprocessOptions& o, const Tokenizer& tok, const Logger& log) {
  try {
    preprocess_jsonl(o, tok, log);
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

TEST(DataPreprocess, MalformedLineStopsWithFileLineUnlessSkipped) {
  Fixture f;
  // Line 51 is broken JSON, line 60 lacks the key, line 70 has an empty text, line 80 is blank.
  write_corpus_with(
      f.dir / "bad.jsonl", 100,
      {{50, "{\"text\": \"unterminated"}, {59, "{\"body\": \"x\"}"}, {69, "{\"text\": \"\"}"}, {79, "   "}});
  const Logger log(0, 1, LogLevel::kWarning);
  PreprocessOptions o = jsonl_options(f.dir, "bad.jsonl");
  const std::string err = preprocess_error(o, *f.tok, log);
  EXPECT_NE(err.find("bad.jsonl:51:"), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(f.dir / "out_text_document.bin"));
  EXPECT_FALSE(std::filesystem::exists(f.dir / "out_text_document.idx"));
  EXPECT_FALSE(std::filesystem::exists(f.dir / "out_text_document.bin.tmp"));
  o.skip_bad_lines = true;
  const auto s = preprocess_jsonl(o, *f.tok, log);
  EXPECT_EQ(s.bad_lines, 2);
  EXPECT_EQ(s.first_bad_lines, (std::vector<int64_t>{51, 60}));
  EXPECT_EQ(s.empty_skipped, 1);
  EXPECT_EQ(s.blank_lines, 1);
  EXPECT_EQ(s.documents, 96);
  EXPECT_EQ(MMapIndexedDataset((f.dir / "out_text_document").string()).size(), 96u);
}

TEST(DataPreprocess, AHugeWordIsABadLineNotGigabytes) {
  Fixture f;
  // Line 5 holds one "word" of 2 MiB: BPE would need gigabytes for a 50 MB one; it is refused as a bad line.
  write_corpus_with(f.dir / "huge.jsonl", 20, {{4, "{\"text\": \"" + std::string(2 << 20, 'a') + "\"}"}});
  const Logger log(0, 1, LogLevel::kWarning);
  PreprocessOptions o = jsonl_options(f.dir, "huge.jsonl");
  const std::string err = preprocess_error(o, *f.tok, log);
  EXPECT_NE(err.find("huge.jsonl:5:"), std::string::npos) << err;
  EXPECT_NE(err.find("a word of 2097152 bytes"), std::string::npos) << err;
  o.skip_bad_lines = true;
  const auto s = preprocess_jsonl(o, *f.tok, log);
  EXPECT_EQ(s.bad_lines, 1);
  EXPECT_EQ(s.documents, 19);
}

TEST(DataPreprocess, RepairsInvalidUtf8AndLoneSurrogates) {
  JsonLineParser p({"text"});
  std::vector<std::string_view> v;
  std::string line =
      "{\"text\": \"a\xff"
      "b\"}";
  line.reserve(line.size() + 64);
  EXPECT_EQ(p.parse(line, v), "");
  EXPECT_EQ(v[0],
            "a\xEF\xBF\xBD"
            "b");
  std::string sur = R"({"text": "x\ud800y\ud83d\ude00"})";
  sur.reserve(sur.size() + 64);
  EXPECT_EQ(p.parse(sur, v), "");
  EXPECT_EQ(v[0], "x\xEF\xBF\xBDy\xF0\x9F\x98\x80");
  std::string num = R"({"text": 5})";
  num.reserve(num.size() + 64);
  EXPECT_NE(p.parse(num, v).find("not a string"), std::string::npos);
}

TEST(DataPreprocess, PromptKeysStayAlignedAcrossEmptyTexts) {
  // Prompt pairs (--json-keys inputs targets): an empty input on one line and an empty target on another must not
  // shift the pairing of the lines between them, as Megatron's skip would (its counts would even agree).
  Fixture f;
  testing::write_file(f.dir / "prompts.jsonl", R"({"inputs": "the", "targets": "and"}
{"inputs": "", "targets": "cat"}
{"inputs": "dog", "targets": "the"}
{"inputs": "an", "targets": ""}
)");
  const Logger log(0, 1, LogLevel::kWarning);
  PreprocessOptions o = jsonl_options(f.dir, "prompts.jsonl");
  o.json_keys = {"inputs", "targets"};
  const auto s = preprocess_jsonl(o, *f.tok, log);
  EXPECT_EQ(s.empty_kept, 2);
  EXPECT_EQ(s.empty_skipped, 0);
  const MMapIndexedDataset in((f.dir / "out_inputs_document").string()), tg((f.dir / "out_targets_document").string());
  ASSERT_EQ(in.size(), 4u);
  ASSERT_EQ(tg.size(), 4u);
  EXPECT_EQ(in.item_size(1), 0);
  EXPECT_EQ(tg.item_size(3), 0);
  const std::vector<int64_t> dog = in.get(2), the = tg.get(2);
  EXPECT_EQ(f.tok->decode(std::vector<int32_t>(dog.begin(), dog.end())), "dog");
  EXPECT_EQ(f.tok->decode(std::vector<int32_t>(the.begin(), the.end())), "the");
}

TEST(DataPreprocess, DuplicateKeyTakesTheLastValueAsPython) {
  JsonLineParser p({"text", "id"});
  std::vector<std::string_view> v;
  std::string line = R"({"text": "first", "id": "1", "text": "last"})";
  line.reserve(line.size() + 64);
  EXPECT_EQ(p.parse(line, v), "");
  EXPECT_EQ(v[0], "last");
  EXPECT_EQ(v[1], "1");
  std::string bad = R"({"text": "first", "id": "1", "text": 7})";
  bad.reserve(bad.size() + 64);
  EXPECT_NE(p.parse(bad, v).find("not a string"), std::string::npos);
}

}  // namespace
}  // namespace megaton::data
