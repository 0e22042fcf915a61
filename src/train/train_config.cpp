#include "train/train_config.h"

#include "core/error.h"
#include "model/gpt_config.h"

namespace megaton::train {

void TrainConfig::validate(int world) {
  model.validate();
  MEGATON_CHECK(model.seq_length > 0, UsageError, "--seq-length is required for megaton train");
  parallel.validate(world);
  model::check_layout(model, parallel);
  dist.validate();
  loop.validate(parallel);
  lr.validate(loop.train_iters > 0, loop.train_samples > 0);
  optimizer.validate();
  precision.validate(model.fp32_residual_connection);
  fp8.validate();
  checkpoint.validate();
  data.validate();
  logging.validate();
  if (!codecarbon.dir.empty()) codecarbon.validate();
  curriculum.validate(model.seq_length);
}

}  // namespace megaton::train
