// Validation during training (Megatron's evaluate_and_print_results): --eval-iters global batches of each validation
// dataset through the forward-only schedule, the loss averaged over data-parallel ranks and logged. Mode 2
// (--valid-weighted-split-paths) has one dataset per named group; each sees the same stretch of its own samples, as
// each group has its own iterator in Megatron-DeepSpeed.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "data/dataset_builder.h"
#include "dist/process_groups.h"
#include "optim/microbatches.h"
#include "train/batches.h"
#include "train/iteration_log.h"
#include "train/progress.h"
#include "train/training_model.h"

namespace megaton::train {

class Validation {
 public:
  struct Options {
    int micro_batch_size = 0;
    int64_t eval_iters = 0;
    BatchOptions batch;
    bool reads_data = true;  // this rank builds micro-batches (TrainStep::reads_data)
  };
  Validation(TrainingModel& model, std::vector<data::NamedDataset> datasets,
             optim::NumMicroBatchesCalculator& micro_batches, const dist::ProcessGroups& groups, IterationLog& log,
             Options options);

  /// Evaluates every dataset from progress.consumed_valid_samples on and advances it; returns the first dataset's
  /// loss (on the last pipeline stage; nullopt elsewhere or without validation data).
  std::optional<double> run(TrainingProgress& progress);

 private:
  std::optional<double> run_dataset(const data::NamedDataset& valid, TrainingProgress& progress);

  TrainingModel& model_;
  std::vector<data::NamedDataset> datasets_;
  optim::NumMicroBatchesCalculator& micro_batches_;
  const dist::ProcessGroups& groups_;
  IterationLog& log_;
  Options o_;
};

}  // namespace megaton::train
