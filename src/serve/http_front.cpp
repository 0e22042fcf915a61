#include "serve/http_front.h"

#include <httplib.h>

#include <ctime>
#include <random>

#include "core/error.h"
#include "data/utf8.h"
#include "serve/api_error.h"
#include "serve/reply_jobs.h"

namespace megaton::serve {

using json = nlohmann::json;

namespace {

constexpr const char* kJson = "application/json";

json parse_body(const httplib::Request& req) {
  json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) throw ApiError(400, "", "the request body is not valid JSON");
  return body;
}

// Queues `job` and answers with its reply; ApiError(504) when none comes within `timeout_s`.
void queue_and_answer(JobQueue& queue, double timeout_s, const std::shared_ptr<WaitedJob>& job,
                      httplib::Response& res) {
  queue.push(job);
  int status = 200;
  std::string out;
  if (!job->wait(timeout_s, status, out))
    throw ApiError(504, "",
                   "timed out after --request-timeout " + std::to_string(timeout_s) + " s waiting for the model");
  res.status = status;
  res.set_content(out, kJson);
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_body(e.status, e.what(), e.param), kJson);
}

// Rows of an OpenAI request: prompt i's choice j at i * n + j, seeded seed + j.
std::vector<RowSpec> completion_rows(const CompletionRequest& r, uint64_t seed) {
  std::vector<RowSpec> rows;
  for (const auto& p : r.prompts) {
    for (int64_t j = 0; j < r.n; ++j) {
      RowSpec s;
      s.prompt = p;
      s.max_new = r.max_tokens;
      s.temperature = r.temperature;
      s.top_p = r.top_p;
      s.top_k = r.top_k;
      s.seed = seed + static_cast<uint64_t>(j);
      s.logprobs = r.logprobs.has_value();
      s.top_logprobs = r.logprobs.value_or(0);
      s.stop = r.stop;
      s.stop_at_eos = !r.ignore_eos;
      rows.push_back(std::move(s));
    }
  }
  return rows;
}

uint64_t fresh_seed() {
  return (static_cast<uint64_t>(std::random_device{}()) << 32) | std::random_device{}();
}

}  // namespace

HttpFront::HttpFront(const ServeOptions& o, JobQueue& queue, const data::Tokenizer& tok,
                     const data::Tokenizer& decode_tok, const Logger& log)
    : o_(o), queue_(queue), tok_(tok), decode_tok_(decode_tok), log_(log), svr_(std::make_unique<httplib::Server>()) {
  routes();
}

HttpFront::~HttpFront() {
  stop();
}

std::unique_ptr<data::Tokenizer> HttpFront::tokenizer() {
  std::lock_guard<std::mutex> lock(tok_mu_);
  return tok_.clone();
}

int HttpFront::start() {
  const int threads = o_.http_threads;
  svr_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, which lets a second server bind the same port and take
  // half of the connections.
  svr_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  svr_->set_payload_max_length(static_cast<size_t>(o_.max_request_bytes));
  svr_->set_read_timeout(std::max<time_t>(1, static_cast<time_t>(o_.request_timeout)));
  svr_->set_write_timeout(std::max<time_t>(1, static_cast<time_t>(o_.request_timeout)));
  const int port =
      o_.port == 0 ? svr_->bind_to_any_port(o_.host) : (svr_->bind_to_port(o_.host, o_.port) ? o_.port : -1);
  MEGATON_CHECK(port > 0, RuntimeError, "megaton serve: cannot listen on ", o_.host, ":", o_.port,
                " (address in use, or not an address of this host); choose another --host/--port");
  thread_ = std::thread([this] { svr_->listen_after_bind(); });
  return port;
}

void HttpFront::stop() {
  if (!thread_.joinable()) return;
  svr_->stop();
  thread_.join();
}

void HttpFront::routes() {
  httplib::Server& s = *svr_;
  const int64_t seq = o_.model.model.seq_length;

  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const std::exception& e) {
      send_error(res, ApiError(500, "", std::string("internal error: ") + e.what()));
    }
  });
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string what = res.status == 413   ? "the request body exceeds --max-request-bytes"
                             : res.status == 404 ? "no route " + req.method + " " + req.path
                                                 : "HTTP error";
    res.set_content(error_body(res.status, what), kJson);
  });

  s.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.set_content("{}", kJson); });

  s.Get("/v1/models", [this, seq](const httplib::Request&, httplib::Response& res) {
    json m = {{"id", o_.served_model_name},
              {"object", "model"},
              {"created", 0},
              {"owned_by", "megaton"},
              {"max_model_len", seq}};
    res.set_content(dump_json({{"object", "list"}, {"data", json::array({m})}}), kJson);
  });

  s.Post("/v1/completions", [this, seq](const httplib::Request& hreq, httplib::Response& res) {
    const json body = parse_body(hreq);
    auto tok = tokenizer();
    CompletionRequest r = parse_completion_request(body, *tok, seq, o_.max_batch_size);
    if (!r.model.empty() && r.model != o_.served_model_name)
      throw ApiError(404, "model",
                     "The model '" + r.model + "' does not exist; this server serves '" + o_.served_model_name + "'");
    ResponseId rid{"cmpl-" + std::to_string(next_id_++), static_cast<int64_t>(std::time(nullptr)),
                   o_.served_model_name};
    const uint64_t seed = r.seed.value_or(fresh_seed());
    std::vector<RowSpec> rows = completion_rows(r, seed);
    if (r.stream) {
      auto job = std::make_shared<StreamJob>(std::move(r), std::move(rid), decode_tok_);
      job->rows = std::move(rows);
      queue_.push(job);
      const double timeout = o_.request_timeout;
      res.set_chunked_content_provider("text/event-stream", [job, timeout](size_t, httplib::DataSink& sink) {
        std::string events;
        bool over = false;
        if (!job->next_events(timeout, events, over)) {
          const std::string e = "data: " + error_body(504, "timed out waiting for the model") + "\n\n";
          sink.write(e.data(), e.size());
          sink.done();
          return true;
        }
        if (!events.empty() && !sink.write(events.data(), events.size())) {
          job->cancel();
          return false;
        }
        if (over) sink.done();
        return true;
      });
      return;
    }
    auto job = std::make_shared<CompletionJob>(std::move(r), std::move(rid), decode_tok_);
    job->rows = std::move(rows);
    queue_and_answer(queue_, o_.request_timeout, job, res);
  });

  s.Put("/api", [this, seq](const httplib::Request& hreq, httplib::Response& res) {
    try {
      const json body = parse_body(hreq);
      auto tok = tokenizer();
      MegatronRequest r = parse_megatron_request(body, *tok, seq, o_.max_batch_size);
      auto job = std::make_shared<MegatronJob>(r, decode_tok_);
      job->rows = megatron_rows(r, fresh_seed());
      queue_and_answer(queue_, o_.request_timeout, job, res);
    } catch (const ApiError& e) {  // Megatron answers errors with a bare JSON string
      res.status = e.status;
      res.set_content(dump_json(json(e.what())), kJson);
    }
  });

  s.Post("/tokenize", [this](const httplib::Request& hreq, httplib::Response& res) {
    const json body = parse_body(hreq);
    if (!body.is_object() || !body.contains("prompt") || !body["prompt"].is_string())
      throw ApiError(400, "prompt", "'prompt' (a string) is required");
    auto tok = tokenizer();
    const std::vector<int32_t> ids = tok->encode(body["prompt"].get<std::string>());
    res.set_content(dump_json({{"tokens", ids}, {"count", ids.size()}, {"max_model_len", o_.model.model.seq_length}}),
                    kJson);
  });

  s.Post("/detokenize", [this](const httplib::Request& hreq, httplib::Response& res) {
    const json body = parse_body(hreq);
    if (!body.is_object() || !body.contains("tokens") || !body["tokens"].is_array())
      throw ApiError(400, "tokens", "'tokens' (a list of token ids) is required");
    auto tok = tokenizer();
    std::vector<int32_t> ids;
    for (const json& t : body["tokens"]) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= tok->vocab_size())
        throw ApiError(400, "tokens",
                       "'tokens' must hold ids in [0, " + std::to_string(tok->vocab_size()) + "), got " + t.dump());
      ids.push_back(t.get<int32_t>());
    }
    res.set_content(dump_json({{"prompt", data::sanitize_utf8(tok->decode(ids))}}), kJson);
  });

  s.Get("/tokenizer_info", [this](const httplib::Request&, httplib::Response& res) {
    auto tok = tokenizer();
    const std::string eos = data::sanitize_utf8(tok->decode({tok->eod()}));
    res.set_content(dump_json({{"eos_token", eos},
                               {"bos_token", eos},
                               {"pad_token", nullptr},
                               {"tokenizer_class", tok->name()},
                               {"model_max_length", o_.model.model.seq_length},
                               {"vocab_size", tok->vocab_size()}}),
                    kJson);
  });
}

}  // namespace megaton::serve
