// The pretraining loop of `megaton train` (Megatron's training.py: pretrain / train / train_step / evaluate /
// training_log), over 3D parallelism: TP inside GptStage, PP through the 1F1B schedule (or the interleaved one over
// several model chunks per rank, --num-layers-per-virtual-pipeline-stage), DP through DataParallel's gradient buckets
// (ZeRO-1 sharding the optimizer with --zero-stage 1).
//
//   Trainer t(cfg, env, std::cout);   // builds groups, model, optimizer, data; loads --load
//   int code = t.run();               // trains until --train-iters / an exit trigger; saves; returns the exit code
//
// Exit triggers (each leaves a checkpoint when --save is given): the last iteration, --exit-interval,
// --exit-duration-in-mins, --kill-switch-path appearing (these return 0), SIGTERM/SIGUSR1 (returns 7, kInterrupted).
// Ranks agree on stopping through an all-reduce MAX every iteration, so they all stop at the same iteration.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/device_scalar.h"
#include "core/log.h"
#include "core/timer.h"
#include "dist/launch_env.h"
#include "dist/process_groups.h"
#include "parallel/param_info.h"
#include "train/batches.h"
#include "train/train_config.h"

namespace megaton::data {
class SampleDataset;
struct NamedDataset;
}  // namespace megaton::data
namespace megaton::model {
class GptStage;
struct GptConfig;
struct MicroBatch;
}  // namespace megaton::model
namespace megaton::parallel {
class DataParallel;
}
namespace megaton::optim {
class MixedPrecisionOptimizer;
class AnnealingLR;
class NumMicroBatchesCalculator;
}  // namespace megaton::optim

namespace megaton::train {

class TensorBoardWriter;
class MetricsLog;
class StopSignals;

/// What one iteration did (train_step's return).
struct StepOutcome {
  bool skipped_data = false;  // --skip-train-iteration-range: data consumed, no step
  bool updated = false;       // optimizer step taken (false: inf/NaN gradients, the step was skipped)
  torch::Tensor loss;         // [1] on the device: the DP-averaged mean loss (last pipeline stage only; else undefined)
  DeviceScalar grad_norm;     // read when the iteration is logged
  DeviceScalar num_zeros;     // likewise (--log-num-zeros-in-grad)
  int64_t global_batch = 0;
};

class Trainer {
 public:
  /// Collective over MPI_COMM_WORLD (MPI must be initialised). `out` receives the Megatron-style log lines.
  Trainer(TrainConfig cfg, const dist::LaunchEnv& env, std::ostream& out);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Trains until done or told to stop; returns the exit code (0, or 7 after a signal).
  int run();

  int64_t iteration() const { return iteration_; }
  int64_t consumed_train_samples() const { return consumed_train_; }

 private:
  void build();
  void report_memory();
  void load();
  void save();
  /// log_point: this iteration's values reach a log line (what only a log line shows is computed then only).
  StepOutcome train_step(bool log_point);
  std::optional<double> evaluate();  // every validation dataset; returns the first one's loss
  std::optional<double> evaluate_dataset(const data::NamedDataset& valid);
  struct PendingLog;  // a log line's values, captured at its iteration's end (trainer.cpp)
  /// At a log iteration: takes the interval's values, starts their copy to the host and marks the device's position;
  /// nothing waits for the device.
  void capture_log(const StepOutcome& s, int64_t iterations_in_interval);
  /// Writes the captured log line, if any: waits for the device to pass its mark (called once the next iteration's
  /// work is queued, so the device never runs dry at a log line) and reads its values.
  void flush_log();
  /// The device values of a log line, read back: the losses' mean, the grad norm, the params norm (where logged).
  struct LoggedValues {
    std::optional<double> avg_loss, grad_norm, params_norm;
    int64_t nan_iterations = 0;
  };
  void log_iteration(const PendingLog& p, double interval_s, const LoggedValues& values,
                     const std::map<std::string, double>& timer_seconds);
  bool logging_rank() const;
  bool interleaved() const;
  void warn_if_gemm_epilogue_unused() const;  // --gemm-epilogue-fusion where the MLP cannot take it
  bool holds_embedding() const;               // chunk 0 is the first (virtual) stage
  bool holds_loss() const;                    // the last chunk is the last (virtual) stage
  bool stage_reads_data() const;              // this rank builds micro-batches from the samples
  BatchOptions batch_options() const;         // how (--eod-mask-loss, the reset flags)
  /// Megatron's forward_step for model chunk `chunk`: its output [s, b, h], or on the chunk holding the loss the
  /// masked mean loss [] of micro-batch `b`.
  torch::Tensor forward_step(int chunk, const model::MicroBatch& b, const torch::Tensor& input);
  /// Runs `m` micro-batches through this rank's chunks with the schedule of the layout (training or forward-only).
  /// forward(chunk, mb, input) -> output (or the scalar to differentiate on the last stage).
  void run_schedule(int m, const std::function<torch::Tensor(int, int, const torch::Tensor&)>& forward,
                    bool forward_only);
  int agree_on_stop(double elapsed_min);  // 0 none, else a reason code (see trainer.cpp)

  TrainConfig cfg_;
  dist::LaunchEnv env_;
  std::ostream& out_;
  Logger log_;
  dist::ProcessGroups groups_;
  std::unique_ptr<model::GptConfig> gpt_;
  // This rank's model: one GptStage, or with interleaving its V model chunks (chunk k = virtual stage k * PP + pp).
  std::vector<std::unique_ptr<model::GptStage>> chunks_;
  parallel::ParamList params_;  // every chunk's parameters, chunk 0 first (DP buffers, optimizer, checkpoints)
  std::unique_ptr<parallel::DataParallel> dp_;
  std::unique_ptr<optim::MixedPrecisionOptimizer> optimizer_;
  std::unique_ptr<optim::AnnealingLR> lr_;
  std::unique_ptr<optim::NumMicroBatchesCalculator> micro_;
  std::shared_ptr<const data::SampleDataset> train_ds_;
  std::vector<data::NamedDataset>
      valid_sets_;  // mode 1: one unnamed; mode 2: one per --valid-weighted-split-paths group
  std::unique_ptr<TensorBoardWriter> tb_;
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<StopSignals> signals_;
  Timers timers_;
  std::vector<std::pair<int64_t, int64_t>> skip_ranges_;
  int64_t eod_ = -1;
  int64_t train_iters_ = 0;
  int64_t iteration_ = 0;
  int64_t consumed_train_ = 0, consumed_valid_ = 0, consumed_tokens_ = 0;
  int64_t last_saved_ = -1;
  bool memory_reported_ = false;  // the device-memory line is logged once, after the first logged iteration
  // Accumulated since the last log line.
  int64_t skipped_in_interval_ = 0;
  // Each iteration's loss (on the device) and whether its step was taken, until the log line's capture copies them
  // to the host at once: a read per iteration would make every iteration wait for the GPU.
  std::vector<std::pair<torch::Tensor, bool>> pending_losses_;
  DeviceClock clock_;                                 // marks on the compute stream (host clock on the CPU)
  std::shared_ptr<const DeviceMark> interval_start_;  // where the current log interval began
  std::unique_ptr<PendingLog> pending_log_;           // captured, not yet written
};

}  // namespace megaton::train
