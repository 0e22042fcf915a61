// Mixed precision (Megatron's _add_mixed_precision_args): the training dtype and fp16's loss scaler.
#pragma once
#include <torch/torch.h>

namespace megaton::optim {

struct PrecisionOptions {
  bool fp16 = false;
  bool bf16 = false;
  double loss_scale = 0.0;  // 0: dynamic (fp16), none (bf16)
  double initial_loss_scale = 4294967296.0;
  double min_loss_scale = 1.0;
  int loss_scale_window = 1000;
  int hysteresis = 2;

  /// UsageError: --fp16 with --bf16, a negative or zero scaler setting; the model's --fp32-residual-connection
  /// without a 16-bit dtype.
  void validate(bool fp32_residual_connection = false) const;
  /// The parameters' dtype: fp16, bf16 or fp32.
  torch::ScalarType dtype() const { return fp16 ? torch::kHalf : bf16 ? torch::kBFloat16 : torch::kFloat32; }
  bool half() const { return fp16 || bf16; }
};

}  // namespace megaton::optim
