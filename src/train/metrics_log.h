// --metrics-file: one JSON object per logged iteration (JSON Lines), the numbers of Megatron's training_log line
// (reference inventory §7.5) in machine-readable form. Appends, so a resumed run continues the same file; each line is
// flushed as it is written. Absent values (no loss scale in bf16, grad norm without clipping) are left out.
#pragma once
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace megaton::train {

struct IterationMetrics {
  int64_t iteration = 0;
  int64_t train_iters = 0;
  int64_t consumed_samples = 0;
  int64_t consumed_tokens = 0;
  double elapsed_ms_per_iteration = 0.0;
  double learning_rate = 0.0;
  int64_t global_batch_size = 0;
  std::optional<double> lm_loss;  // averaged over the iterations since the last log
  std::optional<double> loss_scale;
  std::optional<double> grad_norm;
  std::optional<int64_t> num_zeros;
  std::optional<double> params_norm;
  int64_t skipped_iterations = 0;
  int64_t nan_iterations = 0;
  double samples_per_second = 0.0;
  std::optional<double> tflops;
  /// Anything else the loop wants recorded (timers, validation loss): merged into the object.
  nlohmann::json extra = nlohmann::json::object();

  nlohmann::json to_json() const;
};

class MetricsLog {
 public:
  /// Opens `path` for appending, creating parent directories (RuntimeError naming the path on failure).
  explicit MetricsLog(const std::string& path);
  void write(const IterationMetrics& m);
  /// Writes any JSON object as one line.
  void write(const nlohmann::json& object);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace megaton::train
