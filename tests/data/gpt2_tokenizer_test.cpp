// GPT-2 BPE: known ids, round trips, the BPE algorithm against a direct transcription of encoder.py's `bpe`, the
// long-word (heap) path against the short-word path, invalid UTF-8, and errors for bad vocabulary files.
#include "data/gpt2_tokenizer.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "core/error.h"
#include "core/remove_tree.h"
#include "data/byte_level.h"
#include "data/data_test_util.h"
#include "data/gpt2_pretokenizer.h"
#include "data/regex_splitter.h"
#include "data/utf8.h"

namespace megaton::data {
namespace {

using testing::gpt2_file;

std::unique_ptr<Tokenizer> gpt2() {
  return make_tokenizer("GPT2BPETokenizer", gpt2_file("vocab.json"), gpt2_file("merges.txt"), "");
}

TEST(TokenizerGpt2, KnownIds) {
  MEGATON_REQUIRE_GPT2();
  auto tok = gpt2();
  EXPECT_EQ(tok->vocab_size(), 50257);
  EXPECT_EQ(tok->eod(), 50256);
  EXPECT_EQ(tok->encode("Hello world"), (std::vector<int32_t>{15496, 995}));
  EXPECT_EQ(tok->encode("Hello, world!"), (std::vector<int32_t>{15496, 11, 995, 0}));
  // <|endoftext|> in text is plain text for the reference encoder (ids checked with gpt-3-encoder and js-tiktoken).
  EXPECT_EQ(tok->encode("<|endoftext|>"), (std::vector<int32_t>{27, 91, 437, 1659, 5239, 91, 29}));
  EXPECT_TRUE(tok->encode("").empty());
}

TEST(TokenizerGpt2, RoundTripsArbitraryText) {
  MEGATON_REQUIRE_GPT2();
  auto tok = gpt2();
  const std::vector<std::string> texts = {"I'm   here\n\n  ok 12345 東京 😀",
                                          "  leading and trailing  ",
                                          "tabs\tand\r\nCRLF",
                                          "don't 'll 've",
                                          "ñandú Ελληνικά العربية",
                                          "\u00a0nbsp"};
  for (const auto& t : texts) EXPECT_EQ(tok->decode(tok->encode(t)), t) << t;
}

TEST(TokenizerGpt2, InvalidUtf8BecomesReplacementCharacter) {
  MEGATON_REQUIRE_GPT2();
  auto tok = gpt2();
  // \xff is one maximal invalid subpart, \xe6\x9d is a truncated 3-byte sequence: one U+FFFD each.
  EXPECT_EQ(tok->encode("a\xff"
                        "b"),
            tok->encode("a\xEF\xBF\xBD"
                        "b"));
  EXPECT_EQ(tok->encode("x\xe6\x9d y"), tok->encode("x\xEF\xBF\xBD y"));
  EXPECT_EQ(sanitize_utf8("\xed\xa0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a UTF-8 encoded surrogate
  EXPECT_EQ(sanitize_utf8("\xf0\x9f\x98"), "\xEF\xBF\xBD");                          // truncated emoji
  EXPECT_EQ(sanitize_utf8("ok"), "ok");
}

// encode.py's `bpe`, on strings: the reference the fast id-based implementation must equal.
std::vector<std::string> reference_bpe(const std::string& word,
                                       const std::map<std::pair<std::string, std::string>, int>& ranks) {
  std::vector<std::string> w;
  for (char c : word) w.emplace_back(1, c);
  while (w.size() > 1) {
    int best = INT32_MAX;
    std::pair<std::string, std::string> bigram;
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      auto it = ranks.find({w[i], w[i + 1]});
      if (it != ranks.end() && it->second < best) best = it->second, bigram = it->first;
    }
    if (best == INT32_MAX) break;
    std::vector<std::string> nw;
    for (size_t i = 0; i < w.size();) {
      if (i + 1 < w.size() && w[i] == bigram.first && w[i + 1] == bigram.second) {
        nw.push_back(w[i] + w[i + 1]);
        i += 2;
      } else {
        nw.push_back(w[i++]);
      }
    }
    w.swap(nw);
  }
  return w;
}

TEST(TokenizerGpt2, BpeMatchesReferenceAlgorithmOnRandomWords) {
  MEGATON_REQUIRE_GPT2();
  int32_t eod = 0;
  auto tokens = read_gpt2_vocab(gpt2_file("vocab.json"), &eod);
  auto merges = read_gpt2_merges(gpt2_file("merges.txt"));
  std::map<std::pair<std::string, std::string>, int> ranks;
  for (size_t r = 0; r < merges.size(); ++r) ranks.emplace(merges[r], static_cast<int>(r));
  const BpeModel model(tokens, merges, "gpt2");
  std::mt19937 rng(7);
  const std::string alphabet = "aeiouthnsrl  eeaa";
  for (int trial = 0; trial < 300; ++trial) {
    // Lengths up to 300 exercise both the array path (<= 64 bytes) and the heap path.
    const size_t len = 1 + rng() % (trial < 200 ? 64 : 300);
    std::string w;
    for (size_t i = 0; i < len; ++i) w.push_back(alphabet[rng() % alphabet.size()]);
    std::vector<int32_t> ids;
    model.encode_word(w, ids);
    std::vector<std::string> got;
    for (int32_t id : ids) got.push_back(model.token_bytes(id));
    EXPECT_EQ(got, reference_bpe(w, ranks)) << "word '" << w << "'";
  }
}

TEST(TokenizerGpt2, PreTokenizerFollowsPythonWhitespace) {
  // U+0085 (NEL) is White_Space for Python's `regex` (the reference); U+FEFF is not.
  RegexSplitter re(kGpt2Pattern, "test");
  RegexSplitter::Matcher m(re);
  auto pieces = [&](const std::string& s) {
    std::vector<std::string> out;
    size_t pos = 0, b = 0, e = 0;
    while (pos < s.size() && m.find(s, pos, b, e)) out.push_back(s.substr(b, e - b)), pos = e;
    return out;
  };
  EXPECT_EQ(pieces("a   b"), (std::vector<std::string>{"a", "  ", " b"}));
  EXPECT_EQ(pieces("I'll 42x"), (std::vector<std::string>{"I", "'ll", " 42", "x"}));
  EXPECT_EQ(pieces("a\xC2\x85!"), (std::vector<std::string>{"a", "\xC2\x85", "!"}));
  EXPECT_EQ(pieces("a\xEF\xBB\xBF!"), (std::vector<std::string>{"a", "\xEF\xBB\xBF!"}));
  EXPECT_EQ(pieces("x!?  "), (std::vector<std::string>{"x", "!?", "  "}));
}

TEST(TokenizerGpt2, NestedClassesAreUnionsAsInOniguruma) {
  // BLOOM's pre-tokenizer: '(', '|' and ')' are members of the negated class, and so is the nested [.,!?].
  RegexSplitter re(" ?[^(\\s|[.,!?])]+", "bloom");
  RegexSplitter::Matcher m(re);
  std::vector<std::string> pieces;
  const std::string s = "Hi (there)|you, ok?";
  size_t pos = 0, b = 0, e = 0;
  while (pos < s.size() && m.find(s, pos, b, e)) pieces.push_back(s.substr(b, e - b)), pos = e;
  EXPECT_EQ(pieces, (std::vector<std::string>{"Hi", "there", "you", " ok"}));
  EXPECT_EQ(portable_pattern("[a[bc]d]"), "[abcd]");
  EXPECT_EQ(portable_pattern("[[:alpha:]x]"), "[[:alpha:]x]");
  EXPECT_THROW(RegexSplitter("[a[^b]]", "nested negation"), DataError);
}

TEST(TokenizerGpt2, ScannerEqualsPcre2RegexOnRandomText) {
  // The hand-written scanner must cut exactly where the PCRE2 regex does.
  RegexSplitter re(kGpt2Pattern, "test");
  RegexSplitter::Matcher m(re);
  const Gpt2PreTokenizer scanner;
  const std::vector<std::string> atoms = {"a",
                                          "Z",
                                          "é",
                                          "東",
                                          "ß",
                                          "7",
                                          "٣",
                                          "½",
                                          "Ⅻ",
                                          " ",
                                          " ",
                                          "  ",
                                          "\n",
                                          "\t",
                                          "\r\n",
                                          "\xC2\x85",
                                          "\xC2\xA0",
                                          "\xE2\x80\xA8",
                                          "\xE3\x80\x80",
                                          "\xEF\xBB\xBF",
                                          "'",
                                          "'s",
                                          "'t",
                                          "'re",
                                          "'ve",
                                          "'m",
                                          "'ll",
                                          "'d",
                                          "'S",
                                          "!",
                                          "?",
                                          ".",
                                          "😀",
                                          "\xE2\x80\x8D",
                                          "e\xCC\x81",
                                          "\xEF\xBF\xBD",
                                          "-",
                                          "_",
                                          "$",
                                          "\x01"};
  std::mt19937 rng(11);
  for (int trial = 0; trial < 3000; ++trial) {
    std::string s;
    const size_t len = 1 + rng() % 24;
    for (size_t k = 0; k < len; ++k) s += atoms[rng() % atoms.size()];
    std::vector<std::string> want, got;
    size_t pos = 0, b = 0, e = 0;
    while (pos < s.size() && m.find(s, pos, b, e)) want.push_back(s.substr(b, e - b)), pos = e;
    for (size_t p = 0; p < s.size();) {
      const size_t q = scanner.next(s, p);
      ASSERT_GT(q, p);
      got.push_back(s.substr(p, q - p));
      p = q;
    }
    ASSERT_EQ(got, want) << "text '" << s << "'";
  }
  EXPECT_EQ(scanner.classify(0x85), Gpt2PreTokenizer::kSpace);
  EXPECT_EQ(scanner.classify(0xFEFF), Gpt2PreTokenizer::kOther);
  EXPECT_EQ(scanner.classify(0x6771), Gpt2PreTokenizer::kLetter);
  EXPECT_EQ(scanner.classify(0x0663), Gpt2PreTokenizer::kNumber);
}

TEST(TokenizerGpt2, ByteLevelAlphabet) {
  EXPECT_EQ(bytes_to_byte_level(" the"), "\xC4\xA0the");  // "Ġthe"
  std::string raw;
  ASSERT_TRUE(byte_level_to_bytes("\xC4\xA0the", raw));
  EXPECT_EQ(raw, " the");
  std::set<uint32_t> cps;
  for (int b = 0; b < 256; ++b) cps.insert(byte_to_code_point(static_cast<uint8_t>(b)));
  EXPECT_EQ(cps.size(), 256u);
  EXPECT_FALSE(byte_level_to_bytes("\xE4\xB8\x80", raw));  // U+4E00 is not in the alphabet
}

TEST(TokenizerGpt2, ClonesEncodeIdentically) {
  MEGATON_REQUIRE_GPT2();
  auto tok = gpt2();
  auto c = tok->clone();
  EXPECT_EQ(tok->encode("The quick brown fox"), c->encode("The quick brown fox"));
}

TEST(TokenizerGpt2, BadFilesAreDataErrorsNamingTheFile) {
  const auto dir = testing::scratch_dir("tok");
  testing::write_file(dir / "vocab.json", "{\"a\": 0,");
  testing::write_file(dir / "merges.txt", "#version: 0.2\na b c\n");
  try {
    Gpt2Tokenizer t((dir / "vocab.json").string(), (dir / "merges.txt").string());
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("vocab.json"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_tokenizer("GPT2BPETokenizer", "", "", ""), UsageError);
  EXPECT_THROW(make_tokenizer("BertWordPieceLowerCase", "", "", ""), UsageError);
  try {
    read_gpt2_merges((dir / "merges.txt").string());
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("merges.txt:2"), std::string::npos) << e.what();
  }
  megaton::remove_tree(dir);
}

}  // namespace
}  // namespace megaton::data
