// How far a training run has come: what checkpoints store and every part of the loop reads.
#pragma once
#include <cstdint>

namespace megaton::train {

struct TrainingProgress {
  int64_t iteration = 0;               // iterations done
  int64_t consumed_train_samples = 0;  // over all runs of the job
  int64_t consumed_valid_samples = 0;
  int64_t consumed_train_tokens = 0;
  int64_t skipped_train_samples = 0;  // this run's --skip-train-iteration-range data, not saved (train/skip_ranges.h)
};

}  // namespace megaton::train
