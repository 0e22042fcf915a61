#include "serve/serve_options.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"

namespace megaton::serve {

void ServeOptions::validate(int world) {
  model.validate(world, "serve");
  const int replica = model.parallel.tensor_model_parallel_size * model.parallel.pipeline_model_parallel_size;
  MEGATON_CHECK(world == replica, UsageError, "megaton serve runs one model replica: the job's ", world,
                " ranks must equal --tensor-model-parallel-size x --pipeline-model-parallel-size (", replica,
                "); start one server per replica instead of data parallelism");
  MEGATON_CHECK(port >= 0 && port <= 65535, UsageError, "--port must be in [0, 65535], got ", port);
  MEGATON_CHECK(!host.empty(), UsageError, "--host must name an address, e.g. 127.0.0.1 or 0.0.0.0");
  MEGATON_CHECK(max_batch_size >= 1, UsageError, "--max-batch-size must be >= 1, got ", max_batch_size);
  MEGATON_CHECK(request_timeout > 0, UsageError, "--request-timeout must be > 0 seconds, got ", request_timeout);
  MEGATON_CHECK(max_request_bytes >= 1024, UsageError, "--max-request-bytes must be >= 1024, got ", max_request_bytes);
  MEGATON_CHECK(http_threads >= 0, UsageError, "--http-threads must be >= 0 (0: automatic), got ", http_threads);
  // Every request of a batch holds a connection, and its thread, until it is answered.
  if (http_threads == 0)
    http_threads = static_cast<int>(std::max<int64_t>(16, 2 * std::min<int64_t>(max_batch_size, 512)));
  MEGATON_CHECK(batch_window_ms >= 0, UsageError, "--batch-window-ms must be >= 0, got ", batch_window_ms);
  if (served_model_name.empty()) {
    const std::filesystem::path load = std::filesystem::path(model.load).lexically_normal();
    const std::string base = load.has_filename() ? load.filename().string() : load.parent_path().filename().string();
    served_model_name = base.empty() ? "megaton" : base;
  }
}

}  // namespace megaton::serve
