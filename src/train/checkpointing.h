// The training loop's side of checkpoints: what it saves (weights, optimizer state and scalars, the LR schedule, the
// dropout RNG, the progress counters, the architecture and the run's flags) and how a loaded checkpoint resumes the
// run, as Megatron's save_checkpoint / load_checkpoint do (--finetune, --no-load-optim, --no-load-rng, ...).
// With --async-save a save copies the state into host memory (pinned on a GPU; the buffers are kept for the next
// save) and writes it on a thread of its own (checkpoint/background_save.h); the loop polls it every iteration
// (poll), and the next save and the end of training (finish) wait for it. A failed background write fails the job at
// the iteration where every rank has seen it end, with the synchronous save's error.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "checkpoint/background_save.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_options.h"
#include "core/log.h"
#include "dist/process_groups.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "train/progress.h"
#include "train/train_config.h"
#include "train/training_model.h"

namespace megaton::train {

class TrainCheckpoints {
 public:
  struct Parts {
    TrainingModel& model;
    optim::MixedPrecisionOptimizer& optimizer;
    optim::AnnealingLR& lr;
    const dist::ProcessGroups& groups;
    const Logger& log;
  };
  /// `config` is recorded in each checkpoint (args); `job_id` names the SLURM job in it.
  TrainCheckpoints(Parts parts, const TrainConfig& config, std::string job_id);
  ~TrainCheckpoints();

  /// --load: resumes `progress`, the optimizer and the LR schedule from the checkpoint (collective). Without --load,
  /// or when it holds no checkpoint yet, nothing changes.
  void load(TrainingProgress& progress);
  /// --save: a checkpoint of the state after progress.iteration (collective), unless that iteration is already saved.
  /// With --async-save it waits for the save in flight, then starts this one.
  void save(const TrainingProgress& progress);
  /// --async-save: allocates the host buffers of the state's copy now (pinned memory takes seconds to allocate), so
  /// that the first save blocks no longer than the others. Collective (the optimizer state is gathered as a save does).
  void reserve_host_memory();
  /// Every iteration (collective): a background save that every rank has finished is logged, or its error thrown.
  void poll();
  /// Waits for a background save in flight (collective): the end of training.
  void finish();
  bool saving() const { return !options_.save.empty(); }
  /// The iteration of the newest checkpoint this run saved or loaded (-1: none).
  int64_t last_saved() const { return last_saved_; }

 private:
  Parts p_;
  const TrainConfig& config_;
  checkpoint::CheckpointOptions options_;
  std::string job_id_;
  int64_t last_saved_ = -1;
  std::unique_ptr<checkpoint::BackgroundSave> background_;  // --async-save
  std::vector<torch::Tensor> host_;                         // its host copies of the state, reused save after save
  double background_started_ = 0;                           // when the save in flight started (steady seconds)

  void finished(const std::string& dir);  // logs the background save that ended
  // Points the tensors of a save at host buffers of host_ (allocated where missing or of another shape), copying the
  // values unless `copy` is false; waits for the device's copies.
  void to_host(parallel::ParamList& params, checkpoint::OptimState& optim, checkpoint::RngState& rng, bool copy);
  /// --fp8-format: every pipeline stage's FP8 scaling state merged on rank 0 (one TP x DP replica of each stage
  /// sends it; the replicas agree after the amax reduction); {} on the other ranks. Collective over the world.
  nlohmann::json gathered_fp8_state() const;
};

}  // namespace megaton::train
