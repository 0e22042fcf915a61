// BigScience's mode-2 groups: parsing, the file form, and the document ranges (Python rounding).
#include "data/weighted_split_paths.h"

#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "data/data_test_util.h"

using namespace megaton;
using namespace megaton::data;

TEST(DataWeightedSplit, ParsesGroupAndNormalizesWeights) {
  const auto g = parse_weighted_split_group(" en-fr : 1 0:0.95 /d/en, 3 0.5:1 /d/fr ", "--train-weighted-split-paths");
  EXPECT_EQ(g.name, "en-fr");
  ASSERT_EQ(g.parts.size(), 2u);
  EXPECT_DOUBLE_EQ(g.parts[0].weight, 0.25);
  EXPECT_DOUBLE_EQ(g.parts[1].weight, 0.75);
  EXPECT_DOUBLE_EQ(g.parts[0].end, 0.95);
  EXPECT_DOUBLE_EQ(g.parts[1].start, 0.5);
  EXPECT_EQ(g.parts[1].prefix, "/d/fr");
}

TEST(DataWeightedSplit, MalformedGroupsNameTheFlagAndTheProblem) {
  auto err = [](const std::string& g) {
    try {
      parse_weighted_split_group(g, "--valid-weighted-split-paths");
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(err("1 0-1 /d/a").find("no 'NAME:'"), std::string::npos);
  EXPECT_NE(err("1 0:1 /d/a").find("one non-empty word"), std::string::npos);  // the range's colon is no NAME
  EXPECT_NE(err("v: 1 0-1 /d/a").find("START:END"), std::string::npos);
  EXPECT_NE(err("v: 1 0:1").find("three words"), std::string::npos);
  EXPECT_NE(err("v: x 0:1 /d/a").find("weight 'x' is not a number"), std::string::npos);
  EXPECT_NE(err("v: 1 0.5:0.2 /d/a").find("0 <= START < END <= 1"), std::string::npos);
  EXPECT_NE(err("v: 0 0:1 /d/a").find("sum to 0"), std::string::npos);
  EXPECT_EQ(err("v: 1 0:1 /d/a"), "");
  EXPECT_EQ(err("v 1 0:1 /d/a").rfind("--valid-weighted-split-paths 'v 1 0:1 /d/a'", 0), 0u);
}

TEST(DataWeightedSplit, RangesUsePythonRounding) {
  EXPECT_EQ(split_by_range(0, 1, 10), (std::pair<int64_t, int64_t>{0, 10}));
  EXPECT_EQ(split_by_range(0.25, 0.75, 10), (std::pair<int64_t, int64_t>{2, 8}));  // 2.5 -> 2, 7.5 -> 8
  EXPECT_EQ(split_by_range(0, 0.95, 400), (std::pair<int64_t, int64_t>{0, 380}));
}

TEST(DataWeightedSplit, FileHoldsQuotedGroupsOrOneGroupPerLine) {
  const auto dir = data::testing::scratch_dir("wsp");
  const auto quoted = (dir / "valid.txt").string();
  std::ofstream(quoted) << "\"v1: 1 0:1 /d/a\" \"v2: 1 0:0.5 /d/b, 1 0:1 /d/c\"\n";
  EXPECT_EQ(read_weighted_split_paths_file(quoted, "--valid-weighted-split-paths-path"),
            (std::vector<std::string>{"v1: 1 0:1 /d/a", "v2: 1 0:0.5 /d/b, 1 0:1 /d/c"}));
  const auto lines = (dir / "lines.txt").string();
  std::ofstream(lines) << "v1: 1 0:1 /d/a\n\n  v2: 1 0:1 /d/b  \n";
  EXPECT_EQ(read_weighted_split_paths_file(lines, "--x"),
            (std::vector<std::string>{"v1: 1 0:1 /d/a", "v2: 1 0:1 /d/b"}));
  EXPECT_THROW(read_weighted_split_paths_file((dir / "missing").string(), "--x"), UsageError);
  const auto broken = (dir / "broken.txt").string();
  std::ofstream(broken) << "\"v1: 1 0:1 /d/a\n";
  EXPECT_THROW(read_weighted_split_paths_file(broken, "--x"), UsageError);
}
