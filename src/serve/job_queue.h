// Requests waiting for the model. An HTTP thread turns a request into a Job (its rows and how to answer) and queues
// it; the decoding loop takes as many queued jobs as fit one batch, decodes their rows together, and hands each job
// its rows' results. A job whose client gave up (timeout, closed stream) is dropped when it is taken.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "serve/decode_batch.h"

namespace megaton::serve {

class Job {
 public:
  virtual ~Job() = default;
  std::vector<RowSpec> rows;

  /// From the decoding thread after each step, with this job's rows (streaming jobs send what became final).
  virtual void on_step(const std::vector<const RowResult*>& rows, const std::vector<bool>& done) {}
  /// From the decoding thread: the job's rows are decoded.
  virtual void finish(const std::vector<RowResult>& rows) = 0;
  /// The job will not run (the server is stopping, or decoding failed): `status` and `message` for the client.
  virtual void fail(int status, const std::string& message) = 0;

  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

 private:
  std::atomic<bool> cancelled_{false};
};

class JobQueue {
 public:
  /// ApiError(503) once closed.
  void push(std::shared_ptr<Job> job);
  /// Waits up to `wait` for a job; once one is queued, up to `window` more for the queued rows to reach `max_rows`
  /// (clients answered together send their next requests a moment apart: without the window the next batch would
  /// leave most of them to the batch after). Then takes queued jobs in order while their rows fit `max_rows` (the
  /// first one always). Cancelled jobs are skipped. Empty after the wait or once closed.
  std::vector<std::shared_ptr<Job>> take(int64_t max_rows, std::chrono::milliseconds wait,
                                         std::chrono::milliseconds window = std::chrono::milliseconds(0));
  /// No more jobs; the queued ones fail with 503.
  void close();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> jobs_;
  int64_t queued_rows() const;
  bool closed_ = false;
};

}  // namespace megaton::serve
