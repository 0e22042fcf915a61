// The zero-shot datasets: Megatron's word count, sliding windows that score every target exactly once, the WikiText
// detokenizer, LAMBADA JSONL (strict and not) and the errors for malformed files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "core/error.h"
#include "data/data_test_util.h"
#include "eval/detokenizer.h"
#include "eval/lm_windows.h"
#include "infer/infer_test_util.h"

using namespace megaton;

TEST(EvalDatasets, WordCountIsPythonStripSplitSpace) {
  EXPECT_EQ(eval::count_space_separated(" = Title = \n a b  c \n"), 8);  // "= Title = \n a b  c": 7 spaces
  EXPECT_EQ(eval::count_space_separated("one"), 1);
  EXPECT_EQ(eval::count_space_separated("\n\n"), 1);  // "".split(" ") == [""]
}

TEST(EvalDatasets, WindowsScoreEveryTargetOnce) {
  for (int64_t n : {2, 7, 8, 9, 30, 33}) {
    for (int64_t stride : {1, 3, 8, 0}) {
      std::vector<int32_t> toks(n);
      std::iota(toks.begin(), toks.end(), 0);
      eval::LmWindows w(toks, 8, -1, stride);
      std::vector<int> scored(n, 0);
      for (int64_t i = 0; i < w.size(); ++i) {
        auto win = w.window(i);
        ASSERT_EQ(win.tokens.size(), 9u);
        ASSERT_EQ(win.mask.size(), 8u);
        for (int j = 0; j < 8; ++j) {
          if (!win.mask[j]) continue;
          const int32_t target = win.tokens[j + 1];
          ASSERT_GE(target, 0) << "padding scored";
          ++scored[target];
          // Every scored target sees its whole window as context: the window starts at i * stride.
          EXPECT_EQ(win.tokens[0], i * w.stride());
        }
      }
      EXPECT_EQ(scored[0], 0);
      for (int64_t t = 1; t < n; ++t) EXPECT_EQ(scored[t], 1) << "n=" << n << " stride=" << stride << " t=" << t;
    }
  }
  // Megatron's count: max(ceil(max(T - stride, 0) / stride) + 1, 1) with T = n - 1 targets.
  EXPECT_EQ(eval::LmWindows(std::vector<int32_t>(33), 8, 0, 3).size(), 11);  // ceil(29/3)+1
  EXPECT_EQ(eval::LmWindows(std::vector<int32_t>(33), 8, 0, 0).size(), 4);   // stride 8: ceil(24/8)+1
  EXPECT_THROW(eval::LmWindows(std::vector<int32_t>(1), 8, 0, 0), DataError);
}

TEST(EvalDatasets, WikitextDetokenizer) {
  EXPECT_EQ(eval::wikitext_detokenize(" = = Early life = = \n He was born in 1 @,@ 000 @-@ year @.@ 5 ( see below ) , "
                                      "\" quoted \" and it 's fine . \n"),
            " == Early life ==\nHe was born in 1,000-year.5 (see below), \"quoted\" and it's fine.\n");
  EXPECT_EQ(eval::ptb_detokenize("do n't stop"), "don't stop");
  std::string name;
  eval::detokenizer_for_path("/d/wikitext-103/wiki.test.tokens", &name);
  EXPECT_EQ(name, "wiki");
  auto identity = eval::detokenizer_for_path("/d/other.txt", &name);
  EXPECT_EQ(name, "none");
  EXPECT_EQ(identity(" @-@ "), " @-@ ");
}

TEST(EvalDatasets, RawTextErrorsNameTheFile) {
  const auto dir = data::testing::scratch_dir("eval");
  data::testing::write_file(dir / "bad.tokens", std::string("ok text \xff\xfe more"));
  try {
    eval::read_raw_text((dir / "bad.tokens").string());
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.tokens: invalid UTF-8 at byte offset 8"), std::string::npos) << e.what();
  }
  data::testing::write_file(dir / "empty.tokens", " \n");
  EXPECT_THROW(eval::read_raw_text((dir / "empty.tokens").string()), DataError);
  EXPECT_THROW(eval::read_raw_text((dir / "missing.tokens").string()), DataError);
  data::testing::write_file(dir / "good.tokens", " a b c \n");
  auto r = eval::read_raw_text((dir / "good.tokens").string());
  EXPECT_EQ(r.num_original_tokens, 3);
  EXPECT_EQ(r.text, " a b c \n");
}

TEST(EvalDatasets, LambadaStrictAndNonStrict) {
  const auto dir = data::testing::scratch_dir("eval");
  data::testing::write_file(dir / "l.jsonl", "{\"text\": \"the cat sat on the mat\"}\n\n{\"text\": \"go home\"}\n");
  infertest::ByteTokenizer tok;
  auto strict = eval::read_lambada((dir / "l.jsonl").string(), tok, true, 32, 256);
  ASSERT_EQ(strict.examples.size(), 2u);
  EXPECT_EQ(strict.skipped_blank, 1);
  // Strict: context "the cat sat on the" (stripped), target " mat" (4 byte tokens).
  const auto& w = strict.examples[0];
  const std::string ctx = "the cat sat on the", tgt = " mat";
  ASSERT_EQ(w.tokens.size(), 33u);
  EXPECT_EQ(std::string(w.tokens.begin(), w.tokens.begin() + ctx.size() + tgt.size()), ctx + tgt);
  EXPECT_EQ(w.tokens.back(), 256);            // padded with EOD
  for (size_t j = 0; j < w.mask.size(); ++j)  // mask aligned with labels tokens[1:]: targets at ctx.size()-1+1 ...
    EXPECT_EQ(w.mask[j], (j + 1 >= ctx.size() && j + 1 < ctx.size() + tgt.size()) ? 1 : 0) << j;
  // Non-strict: the last token only ("t").
  auto loose = eval::read_lambada((dir / "l.jsonl").string(), tok, false, 32, 256);
  int ones = 0;
  for (auto m : loose.examples[0].mask) ones += m;
  EXPECT_EQ(ones, 1);
  EXPECT_EQ(loose.examples[0].mask[std::string("the cat sat on the mat").size() - 2], 1);
}

TEST(EvalDatasets, LambadaMalformedLinesNameFileAndLine) {
  const auto dir = data::testing::scratch_dir("eval");
  infertest::ByteTokenizer tok;
  auto expect_error = [&](const std::string& content, const std::string& needle, int64_t seq = 32) {
    data::testing::write_file(dir / "x.jsonl", content);
    try {
      eval::read_lambada((dir / "x.jsonl").string(), tok, true, seq, 256);
      ADD_FAILURE() << "no error for " << content;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error("{\"text\": \"a b\"}\n{\"text\": \"broken\"\n", "x.jsonl:2: not a JSON object");
  expect_error("{\"txt\": \"a b\"}\n", "x.jsonl:1: expected a JSON object with a string \"text\"");
  expect_error("[1, 2]\n", "x.jsonl:1: expected a JSON object");
  expect_error("{\"text\": \"   \"}\n", "x.jsonl:1: the text has no word");
  expect_error("{\"text\": \"a long sentence here\"}\n", "x.jsonl:1: the example has 20 tokens", 8);
  expect_error("\n\n", "no LAMBADA examples");
}
