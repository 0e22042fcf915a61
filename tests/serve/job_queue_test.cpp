// The decoding loop's queue: the batch window collects requests that arrive a moment apart into one batch, returns
// as soon as the batch is full, and takes what fits.
#include "serve/job_queue.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

using namespace megaton::serve;
using namespace std::chrono_literals;

namespace {

struct RowsJob : Job {
  explicit RowsJob(int n) { rows.resize(static_cast<size_t>(n)); }
  void finish(const std::vector<RowResult>&) override {}
  void fail(int, const std::string&) override {}
};

}  // namespace

TEST(JobQueue, WindowGathersJobsArrivingAMomentApart) {
  JobQueue q;
  q.push(std::make_shared<RowsJob>(1));
  std::thread late([&] {
    for (int i = 0; i < 3; ++i) {
      std::this_thread::sleep_for(20ms);
      q.push(std::make_shared<RowsJob>(1));
    }
  });
  const auto jobs = q.take(4, 1000ms, 10000ms);  // returns once 4 rows are queued, long before the window ends
  late.join();
  EXPECT_EQ(jobs.size(), 4u);
}

TEST(JobQueue, FullBatchDoesNotWaitAndLeavesTheRest) {
  JobQueue q;
  for (int n : {2, 2, 1}) q.push(std::make_shared<RowsJob>(n));
  const auto t0 = std::chrono::steady_clock::now();
  const auto first = q.take(4, 1000ms, 10000ms);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5000ms);
  EXPECT_EQ(first.size(), 2u);  // 2 + 2 rows; the third job does not fit
  const auto second = q.take(4, 1000ms, 0ms);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0]->rows.size(), 1u);
}

TEST(JobQueue, WithoutWindowTakesWhatIsQueued) {
  JobQueue q;
  q.push(std::make_shared<RowsJob>(1));
  EXPECT_EQ(q.take(8, 1000ms, 0ms).size(), 1u);
  EXPECT_TRUE(q.take(8, 10ms, 0ms).empty());
}
