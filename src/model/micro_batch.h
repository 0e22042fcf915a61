// One micro-batch of training or evaluation samples, as the model's forward takes it.
#pragma once
#include <torch/torch.h>

#include "ops/attention.h"

namespace megaton::model {

struct MicroBatch {
  torch::Tensor tokens;        // [b, s] int64
  torch::Tensor labels;        // [b, s] int64 (tokens shifted by one)
  torch::Tensor loss_mask;     // [b, s] float/bool
  torch::Tensor position_ids;  // [b, s] or undefined
  ops::Documents documents;    // --reset-attention-mask's (each forward takes documents.per_forward()), or none
};

}  // namespace megaton::model
