// The pretraining loop of `megaton train` (Megatron's training.py: pretrain / train), over 3D parallelism: TP inside
// GptStage, PP through the pipeline schedules (1F1B, or interleaved over several model chunks per rank), DP through
// DataParallel's gradient buckets (ZeRO-1 sharding the optimizer with --zero-stage 1). Its parts:
//   TrainingModel      this rank's model chunks and the schedule over them
//   TrainStep          one iteration: micro-batches, forward and backward, the optimizer step
//   IterationLog       the log line, TensorBoard and the metrics file
//   Validation         validation every --eval-interval and at the end
//   TrainCheckpoints   --load at the start, --save every --save-interval and at the end
//   StopConditions     the exit triggers, agreed by every rank
//
//   Trainer t(cfg, env, std::cout);   // builds groups, model, optimizer, data; loads --load
//   int code = t.run();               // trains until --train-iters / an exit trigger; saves; returns the exit code
//
// Exit triggers (each leaves a checkpoint when --save is given): the last iteration, --train-tokens, --exit-interval,
// --exit-duration-in-mins, --kill-switch-path appearing, SIGTERM/SIGUSR1; every one returns 0 (Megatron-DeepSpeed
// exits 0 after its signal handler's save too), and the closing log lines say which trigger it was.
#pragma once
#include <memory>
#include <ostream>

#include "core/log.h"
#include "core/timer.h"
#include "dist/launch_env.h"
#include "dist/process_groups.h"
#include "train/curriculum.h"
#include "train/progress.h"
#include "train/skip_ranges.h"
#include "train/train_config.h"

namespace megaton::data {
class SampleDataset;
}
namespace megaton::parallel {
class DataParallel;
}
namespace megaton::optim {
class MixedPrecisionOptimizer;
class AnnealingLR;
class NumMicroBatchesCalculator;
}  // namespace megaton::optim

namespace megaton::train {

class TrainingModel;
class TrainStep;
class IterationLog;
class Validation;
class TrainCheckpoints;
class StopConditions;
class CodecarbonTracker;

class Trainer {
 public:
  /// `cfg` validated (TrainConfig::validate). Collective over MPI_COMM_WORLD (MPI must be initialised); the
  /// tokenizer is read and every remaining check made before the first collective. `out` receives the Megatron-style
  /// log lines.
  Trainer(TrainConfig cfg, const dist::LaunchEnv& env, std::ostream& out);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Trains until done or told to stop; returns the exit code (0, or 7 after a signal).
  int run();

  int64_t iteration() const { return progress_.iteration; }
  int64_t consumed_train_samples() const { return progress_.consumed_train_samples; }

 private:
  void report_memory() const;
  double gigaflos_per_token() const;
  void warn_if_gemm_epilogue_unused() const;  // --gemm-epilogue-fusion where the MLP cannot take it
  /// After an iteration without a grad scaler: counts updates skipped for NaN/inf gradients in a row and throws
  /// RuntimeError once --max-nan-iterations is reached (the state stays finite: nothing bad was applied or saved).
  void check_nonfinite(bool updated);
  /// UsageError before anything is allocated when the weights, gradients and optimizer state of the busiest rank
  /// exceed the device's memory (a hostile --max-position-embeddings or --hidden-size).
  void refuse_if_state_cannot_fit(int64_t padded_vocab, const torch::Device& device) const;
  /// The closing line: iterations, samples and tokens of this run, its time and rate, where the checkpoints went.
  void log_summary(const TrainingProgress& at_start, double seconds) const;

  TrainConfig cfg_;
  dist::LaunchEnv env_;
  std::ostream& out_;
  Logger log_;
  dist::ProcessGroups groups_;
  Timers timers_;
  TrainingProgress progress_;
  int64_t train_iters_ = 0;
  bool killed_at_start_ = false;
  int64_t nan_run_ = 0;  // updates skipped in a row for NaN/inf gradients (no grad scaler)
  std::unique_ptr<SkipRanges> skip_ranges_;
  std::unique_ptr<CurriculumScheduler> curriculum_;  // the DeepSpeed config's curriculum_learning, when enabled  // the
                                                     // kill switch existed at start: run() returns at once
  std::unique_ptr<TrainingModel> model_;
  std::unique_ptr<parallel::DataParallel> dp_;
  std::unique_ptr<optim::MixedPrecisionOptimizer> optimizer_;
  std::unique_ptr<optim::AnnealingLR> lr_;
  std::unique_ptr<optim::NumMicroBatchesCalculator> micro_;
  std::shared_ptr<const data::SampleDataset> train_ds_;
  std::unique_ptr<TrainStep> step_;
  std::unique_ptr<IterationLog> iteration_log_;
  std::unique_ptr<Validation> validation_;
  std::unique_ptr<TrainCheckpoints> checkpoints_;
  std::unique_ptr<StopConditions> stop_;
  std::unique_ptr<CodecarbonTracker> codecarbon_;  // --codecarbon-dir, from the start of run()
};

}  // namespace megaton::train
