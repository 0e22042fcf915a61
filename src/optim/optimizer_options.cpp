#include "optim/optimizer_options.h"

#include "core/error.h"

namespace megaton::optim {

void OptimizerOptions::validate() const {
  MEGATON_CHECK(kind == "adam" || kind == "sgd", UsageError, "--optimizer: expected adam|sgd, got '", kind, "'");
  MEGATON_CHECK(weight_decay >= 0, UsageError, "--weight-decay must be >= 0, got ", weight_decay);
  MEGATON_CHECK(clip_grad >= 0, UsageError, "--clip-grad must be >= 0");
  MEGATON_CHECK(adam_beta1 >= 0 && adam_beta1 < 1 && adam_beta2 >= 0 && adam_beta2 < 1, UsageError,
                "--adam-beta1/--adam-beta2 must be in [0, 1)");
  MEGATON_CHECK(!use_bnb || kind == "adam", UsageError,
                "--use-bnb-optimizer is bitsandbytes' 8-bit Adam: it goes with --optimizer adam, not ", kind);
}

}  // namespace megaton::optim
