// Forward passes of a whole TP x PP model replica for inference: every rank of the replica calls the same method with
// the same token ids; the first stage embeds them, hidden states [s, b, h] travel stage to stage over the pp group
// (shapes are known from the ids, so nothing else is exchanged), and the last stage returns logits. Optionally
// through a KV cache (GptStage::forward_cached).
#pragma once
#include <torch/torch.h>

#include "dist/process_groups.h"
#include "model/gpt_stage.h"

namespace megaton::infer {

class StageRunner {
 public:
  /// `stage` must outlive the runner; it is switched to inference (no dropout).
  StageRunner(model::GptStage& stage, const dist::ProcessGroups& groups);

  /// ids [b, s] int64 (the same on every rank of the replica). Last stage: vocab-parallel logits [s, b, V/tp];
  /// other stages: an undefined tensor. `cache` null: a full forward over ids; else ids are the next positions.
  torch::Tensor forward(const torch::Tensor& ids, model::KvCache* cache);

  /// Last stage: full logits [s, b, vocab] (gathered over TP, padding columns dropped), fp32.
  torch::Tensor gather_vocab(const torch::Tensor& parallel_logits) const;

  /// Copies `t` (same shape and dtype on every rank) from the last stage's TP rank 0 to every rank of the replica.
  void broadcast_from_last(torch::Tensor& t) const;

  bool is_last_stage() const { return groups_.is_last_stage(); }
  bool is_first_stage() const { return groups_.is_first_stage(); }
  model::GptStage& stage() { return stage_; }
  const dist::ProcessGroups& groups() const { return groups_; }
  torch::Device device() const { return stage_.config().device; }

 private:
  model::GptStage& stage_;
  const dist::ProcessGroups& groups_;
};

}  // namespace megaton::infer
