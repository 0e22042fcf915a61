#include "serve/reply_jobs.h"

#include <chrono>

#include "serve/api_error.h"

namespace megaton::serve {

using json = nlohmann::json;

std::string error_body(int status, const std::string& message, const std::string& param) {
  const ApiError e(status, param, message);
  return dump_json({{"error",
                     {{"message", message},
                      {"type", e.type()},
                      {"param", param.empty() ? json(nullptr) : json(param)},
                      {"code", nullptr}}}});
}

bool WaitedJob::wait(double timeout_s, int& status, std::string& body) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return ready_; })) {
    cancel();
    return false;
  }
  status = status_;
  body = std::move(body_);
  return true;
}

void WaitedJob::reply(int status, std::string body) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = status;
    body_ = std::move(body);
    ready_ = true;
  }
  cv_.notify_all();
}

void CompletionJob::finish(const std::vector<RowResult>& rows) {
  reply(200, dump_json(completion_json(req_, rows, tok_, rid_.id, rid_.created, rid_.model)));
}

void MegatronJob::finish(const std::vector<RowResult>& rows) {
  reply(200, dump_json(megatron_response(req_, rows, tok_)));
}

void MegatronJob::fail(int status, const std::string& message) {
  reply(status, dump_json(json(message)));
}

StreamJob::StreamJob(CompletionRequest req, ResponseId rid, const data::Tokenizer& tok)
    : req_(std::move(req)), rid_(std::move(rid)), tok_(tok) {
  const int64_t n = static_cast<int64_t>(req_.prompts.size()) * req_.n;
  for (int64_t i = 0; i < n; ++i) streams_.emplace_back(req_, i);
}

json StreamJob::chunk(json choices) const {
  return {{"id", rid_.id},
          {"object", "text_completion"},
          {"created", rid_.created},
          {"model", rid_.model},
          {"choices", std::move(choices)}};
}

void StreamJob::on_step(const std::vector<const RowResult*>& rows, const std::vector<bool>& done) {
  std::string events;
  for (size_t i = 0; i < rows.size(); ++i) {
    json c = streams_[i].next(*rows[i], tok_, done[i]);
    if (!c.is_null()) events += sse_event(chunk(json::array({std::move(c)})));
  }
  if (!events.empty()) push(std::move(events), false);
}

void StreamJob::finish(const std::vector<RowResult>& rows) {
  std::string events;
  for (size_t i = 0; i < rows.size(); ++i) {
    json c = streams_[i].next(rows[i], tok_, true);
    if (!c.is_null()) events += sse_event(chunk(json::array({std::move(c)})));
  }
  if (req_.include_usage) {
    json last = chunk(json::array());
    last["usage"] = usage_json(rows);
    events += sse_event(last);
  }
  push(events + "data: [DONE]\n\n", true);
}

void StreamJob::fail(int status, const std::string& message) {
  push("data: " + error_body(status, message) + "\n\ndata: [DONE]\n\n", true);
}

void StreamJob::push(std::string event, bool last) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_ += event;
    over_ = over_ || last;
  }
  cv_.notify_all();
}

bool StreamJob::next_events(double timeout_s, std::string& events, bool& over) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return over_ || !pending_.empty(); })) {
    cancel();
    return false;
  }
  events.swap(pending_);
  pending_.clear();
  over = over_;
  return true;
}

}  // namespace megaton::serve
