// The optimizer's settings (Megatron's _add_training_args and _add_regularization_args): Adam/AdamW or SGD, weight
// decay, gradient clipping, and which update implementation runs.
#pragma once
#include <string>

namespace megaton::optim {

struct OptimizerOptions {
  std::string kind = "adam";  // adam | sgd  (--optimizer)
  double lr = 0.0;            // the LR scheduler sets it every iteration
  double weight_decay = 0.01;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_eps = 1e-8;
  double sgd_momentum = 0.9;
  double clip_grad = 1.0;  // 0: no clipping and no grad norm (as Megatron)
  bool log_num_zeros_in_grad = false;
  bool use_fused_adam = true;  // CUDA masters: the fused Adam kernel; false: the ATen path (--no-fused-adam)
  /// Without a grad scaler (bf16, fp32): skip the update when the gradients hold NaN or inf, as the fp16 scaler does
  /// (one host read of the grad norm, or of a non-finite flag without --clip-grad, per step).
  bool skip_nonfinite = true;
  /// --use-bnb-optimizer: bitsandbytes' blockwise 8-bit Adam states (adam8bit.h) instead of fp32 moments.
  bool use_bnb = false;

  /// UsageError naming the flag: an unknown --optimizer, negative --weight-decay or --clip-grad, betas outside [0, 1).
  void validate() const;
};

}  // namespace megaton::optim
