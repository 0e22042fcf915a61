#include "dist/job_error.h"

#include <gtest/gtest.h>

using namespace megaton::dist;

namespace {
RankError err(int rank, int code, const std::string& kind, const std::string& what) {
  return RankError{rank, code, kind, what};
}
}  // namespace

TEST(JobError, TheSameErrorOnEveryRankIsOneLine) {
  std::vector<RankError> heard;
  for (int r = 0; r < 4; ++r) heard.push_back(err(r, 3, "data error", "cannot open --vocab-file 'v.json'"));
  const auto lines = error_lines(heard, 4);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "[r0/4] megaton: data error: cannot open --vocab-file 'v.json'");
}

TEST(JobError, PeersTimingOutAreCountedBehindTheCause) {
  // Rank 2 failed; ranks 0, 1 and 3 timed out in a collective waiting for it.
  std::vector<RankError> heard{err(0, 5, "communication error", "all_reduce timed out"),
                               err(1, 5, "communication error", "all_reduce timed out"),
                               err(2, 3, "data error", "corpus.jsonl:17: expected a JSON object"),
                               err(3, 5, "communication error", "all_reduce timed out")};
  EXPECT_EQ(primary_error(heard).rank, 2);
  EXPECT_EQ(primary_error(heard).code, 3);
  const auto lines = error_lines(heard, 4);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "[r2/4] megaton: data error: corpus.jsonl:17: expected a JSON object");
  EXPECT_EQ(lines[1], "[r2/4] megaton: 3 other ranks stopped waiting for it (communication error)");
}

TEST(JobError, OnlyCommunicationErrorsThePrimaryIsTheLowestRank) {
  std::vector<RankError> heard{err(1, 5, "communication error", "recv from rank 2 timed out"),
                               err(3, 5, "communication error", "send to rank 2 timed out")};
  EXPECT_EQ(primary_error(heard).rank, 1);
  const auto lines = error_lines(heard, 4);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1], "[r3/4] megaton: communication error: send to rank 2 timed out");
}

TEST(JobError, DifferentErrorsArePrintedOnceEachUpToTheLimit) {
  std::vector<RankError> heard;
  for (int r = 0; r < 8; ++r) heard.push_back(err(r, 4, "checkpoint error", "shard " + std::to_string(r % 6) + " bad"));
  const auto lines = error_lines(heard, 8, 4);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0], "[r0/8] megaton: checkpoint error: shard 0 bad");
  EXPECT_EQ(lines[3], "[r3/8] megaton: checkpoint error: shard 3 bad");
  EXPECT_EQ(lines[4], "[r0/8] megaton: ... and 2 more different errors on other ranks");
}
