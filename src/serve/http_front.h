// The HTTP side of `megaton serve`, on global rank 0 (cpp-httplib's thread pool):
//   POST /v1/completions     OpenAI completions (completion_request.h), streamed or not
//   GET  /v1/models          the served model
//   PUT  /api                Megatron-LM's generation endpoint (megatron_api.h)
//   POST /tokenize, POST /detokenize, GET /tokenizer_info   the model's tokenizer (vLLM's endpoints, which
//                            lm-eval-harness's local-completions uses instead of loading a tokenizer itself)
//   GET  /health             200 while serving
// Requests become Jobs on the queue; the decoding loop (serve_app.h) answers them. Errors are JSON with a 4xx/5xx
// status; bodies over --max-request-bytes get 413.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/log.h"
#include "data/tokenizer.h"
#include "serve/job_queue.h"
#include "serve/serve_options.h"

namespace httplib {
class Server;
}

namespace megaton::serve {

class HttpFront {
 public:
  /// `decode_tok` is the decoding thread's tokenizer (jobs format their answers with it there); `tok` is cloned
  /// for each request's encoding. Both must outlive the front.
  HttpFront(const ServeOptions& o, JobQueue& queue, const data::Tokenizer& tok, const data::Tokenizer& decode_tok,
            const Logger& log);
  ~HttpFront();

  /// Binds --host:--port (RuntimeError naming them when it cannot) and starts serving; returns the port.
  int start();
  /// Stops accepting and joins the listening thread (requests in flight are answered first).
  void stop();

 private:
  void routes();
  std::unique_ptr<data::Tokenizer> tokenizer();

  const ServeOptions& o_;
  JobQueue& queue_;
  const data::Tokenizer& tok_;
  const data::Tokenizer& decode_tok_;
  const Logger& log_;
  std::mutex tok_mu_;
  std::unique_ptr<httplib::Server> svr_;
  std::thread thread_;
  std::atomic<int64_t> next_id_{0};
};

}  // namespace megaton::serve
