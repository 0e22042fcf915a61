#include "train/metrics_log.h"

#include <filesystem>

#include "core/error.h"

namespace megaton::train {

nlohmann::json IterationMetrics::to_json() const {
  nlohmann::json j = {{"iteration", iteration},
                      {"train_iters", train_iters},
                      {"consumed_samples", consumed_samples},
                      {"consumed_tokens", consumed_tokens},
                      {"elapsed_ms_per_iteration", elapsed_ms_per_iteration},
                      {"learning_rate", learning_rate},
                      {"global_batch_size", global_batch_size},
                      {"skipped_iterations", skipped_iterations},
                      {"nan_iterations", nan_iterations},
                      {"samples_per_second", samples_per_second}};
  if (lm_loss) j["lm_loss"] = *lm_loss;
  if (loss_scale) j["loss_scale"] = *loss_scale;
  if (grad_norm) j["grad_norm"] = *grad_norm;
  if (num_zeros) j["num_zeros"] = *num_zeros;
  if (params_norm) j["params_norm"] = *params_norm;
  if (tflops) j["tflops"] = *tflops;
  if (extra.is_object()) j.update(extra);
  return j;
}

MetricsLog::MetricsLog(const std::string& path) : path_(path) {
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    MEGATON_CHECK(!ec, RuntimeError, "--metrics-file ", path, ": cannot create ", parent.string(), " (", ec.message(),
                  ")");
  }
  out_.open(path, std::ios::app);
  MEGATON_CHECK(out_.good(), RuntimeError, "--metrics-file: cannot open ", path, " for appending");
}

void MetricsLog::write(const IterationMetrics& m) {
  write(m.to_json());
}

void MetricsLog::write(const nlohmann::json& object) {
  MEGATON_CHECK(object.is_object(), InternalError, "metrics line must be a JSON object, got ", object.dump());
  // NaN/inf are not JSON: nlohmann writes them as null, which readers accept.
  out_ << object.dump() << '\n';
  out_.flush();
  MEGATON_CHECK(out_.good(), RuntimeError, "writing ", path_, " failed");
}

}  // namespace megaton::train
