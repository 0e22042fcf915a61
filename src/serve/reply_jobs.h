// The three kinds of Job the HTTP front queues: a completion answered at once (OpenAI JSON), a streamed completion
// (server-sent events as tokens become final), and Megatron's PUT /api. Their finish/fail/on_step run on the decoding
// thread and use its tokenizer; the HTTP thread that queued the job waits on it.
#pragma once
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>

#include "serve/completion_request.h"
#include "serve/completion_response.h"
#include "serve/job_queue.h"
#include "serve/megatron_api.h"

namespace megaton::serve {

/// {"error": {"message", "type", "param", "code": null}}.
std::string error_body(int status, const std::string& message, const std::string& param = "");

/// A job whose HTTP thread waits for one reply.
class WaitedJob : public Job {
 public:
  /// false when `timeout_s` passed first (the job is then cancelled).
  bool wait(double timeout_s, int& status, std::string& body);

 protected:
  void reply(int status, std::string body);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool ready_ = false;
  int status_ = 200;
  std::string body_;
};

/// Names a response: "cmpl-N", when, which model.
struct ResponseId {
  std::string id;
  int64_t created = 0;
  std::string model;
};

class CompletionJob : public WaitedJob {
 public:
  CompletionJob(CompletionRequest req, ResponseId rid, const data::Tokenizer& tok)
      : req_(std::move(req)), rid_(std::move(rid)), tok_(tok) {}
  void finish(const std::vector<RowResult>& rows) override;
  void fail(int status, const std::string& message) override { reply(status, error_body(status, message)); }

 private:
  CompletionRequest req_;
  ResponseId rid_;
  const data::Tokenizer& tok_;
};

class MegatronJob : public WaitedJob {
 public:
  MegatronJob(MegatronRequest req, const data::Tokenizer& tok) : req_(std::move(req)), tok_(tok) {}
  void finish(const std::vector<RowResult>& rows) override;
  void fail(int status, const std::string& message) override;

 private:
  MegatronRequest req_;
  const data::Tokenizer& tok_;
};

class StreamJob : public Job {
 public:
  StreamJob(CompletionRequest req, ResponseId rid, const data::Tokenizer& tok);
  void on_step(const std::vector<const RowResult*>& rows, const std::vector<bool>& done) override;
  void finish(const std::vector<RowResult>& rows) override;
  void fail(int status, const std::string& message) override;

  /// The HTTP side: the next events to send ("" with `over` once the stream ended); false after `timeout_s`
  /// without one.
  bool next_events(double timeout_s, std::string& events, bool& over);

 private:
  void push(std::string event, bool last);
  nlohmann::json chunk(nlohmann::json choices) const;

  CompletionRequest req_;
  ResponseId rid_;
  const data::Tokenizer& tok_;
  std::vector<ChoiceStream> streams_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string pending_;
  bool over_ = false;
};

}  // namespace megaton::serve
