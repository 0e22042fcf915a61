// One training iteration (Megatron's train_step): this data-parallel rank's micro-batches of the global batch from
// the pretraining sampler, the forward and backward of each through the pipeline schedule, the gradient reduction
// and the optimizer step. Nothing here waits for the device: the loss and norms stay on it until a log line reads
// them.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "core/device_scalar.h"
#include "core/timer.h"
#include "data/sample_dataset.h"
#include "dist/process_groups.h"
#include "optim/microbatches.h"
#include "optim/optimizer.h"
#include "parallel/data/data_parallel.h"
#include "train/batches.h"
#include "train/progress.h"
#include "train/training_model.h"

namespace megaton::train {

/// What one iteration did.
struct StepOutcome {
  bool updated = false;    // optimizer step taken (false: inf/NaN gradients, the step was skipped)
  torch::Tensor loss;      // [1] on the device: the DP-averaged mean loss (last pipeline stage only; else undefined)
  DeviceScalar grad_norm;  // read when the iteration is logged
  DeviceScalar num_zeros;  // likewise (--log-num-zeros-in-grad)
  int64_t global_batch = 0;
  int64_t seq_length = 0;  // tokens per sample this iteration (below --seq-length under curriculum learning)
};

class TrainStep {
 public:
  struct Parts {
    TrainingModel& model;
    parallel::DataParallel& dp;
    optim::MixedPrecisionOptimizer& optimizer;
    optim::NumMicroBatchesCalculator& micro_batches;
    const data::SampleDataset& dataset;
    const dist::ProcessGroups& groups;
    Timers& timers;
  };
  struct Options {
    int micro_batch_size = 0;
    BatchOptions batch;
    bool sync_tp_duplicated_parameters = false;
    bool documents_on_every_stage = false;  // every stage's layers read the documents (prefixes, prompts)
  };
  TrainStep(Parts parts, Options options);

  /// Runs the iteration after `progress` (number progress.iteration + 1) on each sample's first `seq_length` tokens.
  /// log_point: this iteration's values reach a log line (what only a log line shows is computed then only).
  StepOutcome run(const TrainingProgress& progress, bool log_point, int seq_length);

  /// Whether this rank builds micro-batches from the samples: the first stage (tokens, positions) and the last
  /// (labels, loss mask), and every stage with documents_on_every_stage (its layers read them).
  bool reads_data() const;

 private:
  Parts p_;
  Options o_;
};

}  // namespace megaton::train
