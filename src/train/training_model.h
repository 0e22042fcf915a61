// This rank's part of the model being trained: one GptStage, or with the interleaved schedule its V model chunks
// (chunk k = virtual stage k * PP + pp), their parameters in one list, the forward of one micro-batch on a chunk
// (Megatron's forward_step), and the pipeline schedule that runs an iteration's micro-batches over them.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "core/log.h"
#include "dist/process_groups.h"
#include "model/gpt_config.h"
#include "model/gpt_stage.h"
#include "model/micro_batch.h"
#include "parallel/param_info.h"
#include "parallel/rng_tracker.h"

namespace megaton::train {

class TrainingModel {
 public:
  /// Builds this rank's chunks of `config` (validated) for `groups`; layers_per_virtual_stage > 0: interleaved.
  TrainingModel(model::GptConfig config, const dist::ProcessGroups& groups, int layers_per_virtual_stage,
                const Logger& log);

  const model::GptConfig& config() const { return config_; }
  int num_chunks() const { return static_cast<int>(chunks_.size()); }
  model::GptStage& chunk(int k) { return *chunks_[static_cast<size_t>(k)]; }
  /// Every chunk's parameters, chunk 0 first (DP buffers, optimizer, checkpoints).
  const parallel::ParamList& params() const { return params_; }
  /// The dropout generators, one for the rank, shared by its chunks (as Megatron).
  parallel::RngTracker& rng() { return chunks_.front()->rng(); }
  void set_training(bool on);
  /// --fp8-format: one step of the FP8 scaling recipe after an iteration's backward: every chunk's amaxes reduced
  /// (maximum) over TP and DP, so the ranks sharing a tensor or a batch use one scale, then the scales updated.
  /// Collective over TP and DP; nothing without FP8.
  void update_fp8_scaling();
  /// Whether the model's linear layers run in FP8.
  bool fp8() const { return config_.fp8.enabled(); }
  /// This rank's FP8 scaling state (every chunk's slots; ops::fp8::ScalingTable::to_json), {} without FP8.
  nlohmann::json fp8_state() const;
  /// Restores each chunk's slots from a state holding them (the merged state of every stage).
  void load_fp8_state(const nlohmann::json& state);
  /// Every chunk's forward calls `fn(begin, end)` before it first reads params() [begin, end) (indices into the
  /// rank's whole list; model::GptStage::set_before_use).
  void set_before_use(const model::GptStage::BeforeUse& fn);

  bool holds_embedding() const { return chunks_.front()->is_first_stage(); }  // chunk 0 is the first (virtual) stage
  bool holds_loss() const { return chunks_.back()->is_last_stage(); }         // the last chunk is the last stage
  bool is_last_stage(int chunk) const { return chunks_[static_cast<size_t>(chunk)]->is_last_stage(); }

  /// Megatron's forward_step on chunk `chunk`: its output [s, b, h] (input: b's tokens on the first stage, else the
  /// previous stage's hidden state), or on the chunk holding the loss the masked mean loss [] of `b`.
  torch::Tensor forward_step(int chunk, const model::MicroBatch& b, const torch::Tensor& input);

  /// forward(chunk, mb, input) -> the chunk's output, or on the last stage the scalar to differentiate;
  /// before_backward(chunk, mb) before each backward.
  using Forward = std::function<torch::Tensor(int chunk, int mb, const torch::Tensor& input)>;
  using BeforeBackward = std::function<void(int chunk, int mb)>;
  /// Runs `m` micro-batches of `micro_batch_size` samples of `seq_length` tokens through this rank's chunks with the
  /// layout's schedule (parallel::pipeline::run_schedule), training or forward-only.
  void run_schedule(int m, int micro_batch_size, int seq_length, const Forward& forward,
                    const BeforeBackward& before_backward, bool forward_only);

 private:
  model::GptConfig config_;
  const dist::ProcessGroups& groups_;
  std::vector<std::unique_ptr<model::GptStage>> chunks_;
  parallel::ParamList params_;
};

}  // namespace megaton::train
