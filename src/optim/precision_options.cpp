#include "optim/precision_options.h"

#include "core/error.h"

namespace megaton::optim {

void PrecisionOptions::validate(bool fp32_residual_connection) const {
  MEGATON_CHECK(!(fp16 && bf16), UsageError, "--fp16 and --bf16 are exclusive");
  MEGATON_CHECK(!fp32_residual_connection || fp16 || bf16, UsageError,
                "--fp32-residual-connection needs --fp16 or --bf16 (the residual stream is already fp32 otherwise)");
  MEGATON_CHECK(loss_scale >= 0, UsageError, "--loss-scale must be >= 0 (0 = dynamic)");
  MEGATON_CHECK(initial_loss_scale > 0 && min_loss_scale > 0, UsageError,
                "--initial-loss-scale and --min-loss-scale must be > 0");
  MEGATON_CHECK(loss_scale_window > 0 && hysteresis > 0, UsageError,
                "--loss-scale-window and --hysteresis must be > 0");
}

}  // namespace megaton::optim
