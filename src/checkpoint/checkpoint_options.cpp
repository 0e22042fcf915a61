#include "checkpoint/checkpoint_options.h"

#include "core/error.h"

namespace megaton::checkpoint {

void CheckpointOptions::validate() const {
  MEGATON_CHECK(save.empty() || save_interval > 0, UsageError, "--save needs --save-interval > 0");
  MEGATON_CHECK(keep_last >= 0, UsageError, "--keep-last must be >= 0");
}

}  // namespace megaton::checkpoint
