// fp16 loss scaling, Megatron's path (megatron/optimizer/grad_scaler.py; reference inventory §7.3 b). The loss is
// multiplied by scale() before backward; the optimizer unscales the fp32 main grads by 1/scale(), checks them for
// inf/NaN (agreed over the model-parallel group) and calls update(found_inf); a step with found_inf is skipped.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>

#include "optim/precision_options.h"

namespace megaton::optim {

class GradScaler {
 public:
  virtual ~GradScaler() = default;
  virtual double scale() const = 0;
  double inv_scale() const { return 1.0 / scale(); }
  virtual void update(bool found_inf) = 0;
  /// Megatron's keys: {scale} for the constant scaler, {scale, growth_tracker, hysteresis_tracker} for the dynamic one.
  virtual nlohmann::json state_dict() const = 0;
  virtual void load_state_dict(const nlohmann::json& state) = 0;
};

/// --loss-scale X: a fixed scale. Steps with inf/NaN grads are still skipped.
class ConstantGradScaler : public GradScaler {
 public:
  explicit ConstantGradScaler(double scale);
  double scale() const override { return scale_; }
  void update(bool) override {}
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& state) override;

 private:
  double scale_;
};

struct DynamicGradScalerOptions {
  double initial_scale = 4294967296.0;  // --initial-loss-scale (2^32)
  double min_scale = 1.0;               // --min-loss-scale
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int growth_interval = 1000;  // --loss-scale-window
  int hysteresis = 2;          // --hysteresis
};

/// DynamicGradScaler. On inf: growth_tracker = 0, hysteresis_tracker -= 1, and if it reached <= 0 the scale is
/// multiplied by backoff_factor (floored at min_scale); the tracker is not refilled, so every further overflow halves
/// again until a clean growth interval passes. Otherwise: after growth_interval consecutive clean steps the scale is
/// multiplied by growth_factor and the hysteresis budget refilled.
class DynamicGradScaler : public GradScaler {
 public:
  explicit DynamicGradScaler(DynamicGradScalerOptions options);
  double scale() const override { return scale_; }
  void update(bool found_inf) override;
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& state) override;

  int growth_tracker() const { return growth_tracker_; }
  int hysteresis_tracker() const { return hysteresis_tracker_; }

 private:
  DynamicGradScalerOptions options_;
  double scale_;
  int growth_tracker_ = 0;
  int hysteresis_tracker_;
};

/// Megatron's choice (megatron/optimizer/__init__.py): --loss-scale X gives a constant scaler (fp16 or bf16); fp16
/// without it the dynamic one; bf16/fp32 without it none (nullptr).
std::unique_ptr<GradScaler> make_grad_scaler(const PrecisionOptions& precision);

}  // namespace megaton::optim
