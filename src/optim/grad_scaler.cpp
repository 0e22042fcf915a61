#include "optim/grad_scaler.h"

#include <algorithm>

#include "core/error.h"

namespace megaton::optim {

namespace {

template <typename T>
T get_checked(const nlohmann::json& state, const char* key, const char* who) {
  MEGATON_CHECK(state.is_object() && state.contains(key), CheckpointError, who, " state: missing key '", key, "' in ",
                state.dump());
  try {
    return state.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(str(who, " state: key '", key, "' has the wrong type (", e.what(), ")"));
  }
}

}  // namespace

ConstantGradScaler::ConstantGradScaler(double scale) : scale_(scale) {
  MEGATON_CHECK(scale > 0, UsageError, "--loss-scale must be > 0, got ", scale);
}

nlohmann::json ConstantGradScaler::state_dict() const {
  return {{"scale", scale_}};
}

void ConstantGradScaler::load_state_dict(const nlohmann::json&) {
  // As Megatron's ConstantGradScaler: the checkpoint is ignored, the command line's --loss-scale wins.
}

DynamicGradScaler::DynamicGradScaler(DynamicGradScalerOptions o)
    : options_(o), scale_(o.initial_scale), hysteresis_tracker_(o.hysteresis) {
  MEGATON_CHECK(o.initial_scale > 0, UsageError, "--initial-loss-scale must be > 0, got ", o.initial_scale);
  MEGATON_CHECK(o.min_scale > 0 && o.min_scale <= o.initial_scale, UsageError, "--min-loss-scale (", o.min_scale,
                ") must be in (0, --initial-loss-scale (", o.initial_scale, ")]");
  MEGATON_CHECK(o.growth_factor > 1, UsageError, "loss-scale growth factor must be > 1, got ", o.growth_factor);
  MEGATON_CHECK(o.backoff_factor > 0 && o.backoff_factor < 1, UsageError,
                "loss-scale backoff factor must be in (0, 1), got ", o.backoff_factor);
  MEGATON_CHECK(o.growth_interval > 0, UsageError, "--loss-scale-window must be > 0, got ", o.growth_interval);
  MEGATON_CHECK(o.hysteresis > 0, UsageError, "--hysteresis must be > 0, got ", o.hysteresis);
}

void DynamicGradScaler::update(bool found_inf) {
  if (found_inf) {
    growth_tracker_ = 0;
    hysteresis_tracker_ -= 1;
    if (hysteresis_tracker_ <= 0) scale_ = std::max(scale_ * options_.backoff_factor, options_.min_scale);
    return;
  }
  growth_tracker_ += 1;
  if (growth_tracker_ == options_.growth_interval) {
    growth_tracker_ = 0;
    hysteresis_tracker_ = options_.hysteresis;
    scale_ *= options_.growth_factor;
  }
}

nlohmann::json DynamicGradScaler::state_dict() const {
  return {{"scale", scale_}, {"growth_tracker", growth_tracker_}, {"hysteresis_tracker", hysteresis_tracker_}};
}

void DynamicGradScaler::load_state_dict(const nlohmann::json& state) {
  const double scale = get_checked<double>(state, "scale", "dynamic grad scaler");
  MEGATON_CHECK(scale > 0, CheckpointError, "dynamic grad scaler state: scale must be > 0, got ", scale);
  scale_ = scale;
  growth_tracker_ = get_checked<int>(state, "growth_tracker", "dynamic grad scaler");
  hysteresis_tracker_ = get_checked<int>(state, "hysteresis_tracker", "dynamic grad scaler");
}

std::unique_ptr<GradScaler> make_grad_scaler(const PrecisionOptions& p) {
  if (!p.fp16 && !p.bf16) return nullptr;
  if (p.loss_scale > 0) return std::make_unique<ConstantGradScaler>(p.loss_scale);
  if (!p.fp16) return nullptr;
  DynamicGradScalerOptions o;
  o.initial_scale = p.initial_loss_scale;
  o.min_scale = p.min_loss_scale;
  o.growth_interval = p.loss_scale_window;
  o.hysteresis = p.hysteresis;
  return std::make_unique<DynamicGradScaler>(o);
}

}  // namespace megaton::optim
