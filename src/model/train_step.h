// The single-pipeline-stage training step (PP = 1; the pipeline schedules drive GptStage themselves): forward and
// backward of every micro-batch of one iteration, gradients accumulated in the parameters' .grad. Each micro-batch's
// loss is divided by the number of micro-batches before backward (Megatron), and multiplied by the loss scale (fp16).
// The optimizer step, data-parallel gradient reduction and clipping belong to the caller.
#pragma once
#include <torch/torch.h>

#include <vector>

#include "model/gpt_stage.h"

namespace megaton::model {

struct MicroBatch {
  torch::Tensor tokens;        // [b, s] int64
  torch::Tensor labels;        // [b, s] int64 (tokens shifted by one)
  torch::Tensor loss_mask;     // [b, s] float/bool
  torch::Tensor position_ids;  // [b, s] or undefined
  torch::Tensor document_ids;  // [b, s] int64 (--reset-attention-mask: ops::document_mask), or undefined: causal
};

struct StepLoss {
  double loss = 0.0;  // mean over micro-batches of each one's masked mean loss (unscaled)
  int micro_batches = 0;
};

/// The attention mask of `mb` for GptStage::forward: ops::document_mask of its document ids, built when asked (one
/// micro-batch's [b, 1, s, s] at a time, not a whole iteration's), or undefined (causal).
torch::Tensor attention_mask(const MicroBatch& mb);

/// Runs forward + backward on every micro-batch. stage must be both first and last (PP = 1).
StepLoss forward_backward_no_pipeline(GptStage& stage, const std::vector<MicroBatch>& batches, double loss_scale = 1.0);

}  // namespace megaton::model
