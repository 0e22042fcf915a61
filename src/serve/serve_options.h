// `megaton serve`'s own options (the model's come from Megatron's flags, as for generate and eval).
#pragma once
#include <cstdint>
#include <string>

#include "infer/inference_options.h"

namespace megaton::serve {

struct ServeOptions {
  infer::InferenceOptions model;
  std::string host = "127.0.0.1";        // --host: the address to listen on (0.0.0.0: every interface)
  int port = 5000;                       // --port (Megatron's server's); 0 picks a free port (logged)
  int64_t max_batch_size = 16;           // --max-batch-size: rows decoded together
  double request_timeout = 600.0;        // --request-timeout seconds: a request waiting longer gets 504
  int64_t max_request_bytes = 16 << 20;  // --max-request-bytes: larger bodies get 413
  std::string served_model_name;         // --served-model-name (default: --load's directory name, else "megaton")
  int http_threads = 0;                  // --http-threads: connections handled at once (0: max(16, 2 x batch))
  int batch_window_ms = 30;              // --batch-window-ms: wait for more requests to fill a batch

  /// The model's rules (InferenceOptions::validate), one model replica (no data parallelism), sane limits.
  /// UsageError naming the flag.
  void validate(int world);
};

}  // namespace megaton::serve
