#include "serve/job_queue.h"

#include "serve/api_error.h"

namespace megaton::serve {

void JobQueue::push(std::shared_ptr<Job> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) throw ApiError(503, "", "the server is shutting down");
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

int64_t JobQueue::queued_rows() const {
  int64_t n = 0;
  for (const auto& j : jobs_)
    if (!j->cancelled()) n += static_cast<int64_t>(j->rows.size());
  return n;
}

std::vector<std::shared_ptr<Job>> JobQueue::take(int64_t max_rows, std::chrono::milliseconds wait,
                                                 std::chrono::milliseconds window) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, wait, [&] { return closed_ || !jobs_.empty(); });
  if (!closed_ && !jobs_.empty() && window.count() > 0)
    cv_.wait_for(lock, window, [&] { return closed_ || queued_rows() >= max_rows; });
  std::vector<std::shared_ptr<Job>> out;
  int64_t rows = 0;
  while (!closed_ && !jobs_.empty()) {
    auto& next = jobs_.front();
    if (next->cancelled()) {
      jobs_.pop_front();
      continue;
    }
    const int64_t n = static_cast<int64_t>(next->rows.size());
    if (!out.empty() && rows + n > max_rows) break;
    rows += n;
    out.push_back(std::move(next));
    jobs_.pop_front();
  }
  return out;
}

void JobQueue::close() {
  std::deque<std::shared_ptr<Job>> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    left.swap(jobs_);
  }
  cv_.notify_all();
  for (auto& j : left) j->fail(503, "the server is shutting down");
}

}  // namespace megaton::serve
