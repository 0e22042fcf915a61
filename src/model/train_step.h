// The single-pipeline-stage training step (PP = 1; the pipeline schedules drive GptStage themselves): forward and
// backward of every micro-batch of one iteration, gradients accumulated in the parameters' .grad. Each micro-batch's
// loss is divided by the number of micro-batches before backward (Megatron), and multiplied by the loss scale (fp16).
// The optimizer step, data-parallel gradient reduction and clipping belong to the caller.
#pragma once
#include <torch/torch.h>

#include <vector>

#include "model/gpt_stage.h"
#include "ops/attention.h"

namespace megaton::model {

struct MicroBatch {
  torch::Tensor tokens;        // [b, s] int64
  torch::Tensor labels;        // [b, s] int64 (tokens shifted by one)
  torch::Tensor loss_mask;     // [b, s] float/bool
  torch::Tensor position_ids;  // [b, s] or undefined
  ops::Documents documents;    // --reset-attention-mask's (each forward takes documents.per_forward()), or none
};

struct StepLoss {
  double loss = 0.0;  // mean over micro-batches of each one's masked mean loss (unscaled)
  int micro_batches = 0;
};

/// Runs forward + backward on every micro-batch. stage must be both first and last (PP = 1).
StepLoss forward_backward_no_pipeline(GptStage& stage, const std::vector<MicroBatch>& batches, double loss_scale = 1.0);

}  // namespace megaton::model
