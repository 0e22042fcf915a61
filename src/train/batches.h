// Micro-batches from a sample dataset (Megatron's get_batch + get_ltor_masks_and_position_ids): each sample is
// seq_length + 1 tokens; tokens = sample[:-1], labels = sample[1:], loss mask 1 except on end-of-document tokens with
// --eod-mask-loss. Causal attention is implicit in the model, so no attention mask is built; position ids are the
// model's default 0..s-1 (--reset-position-ids / --reset-attention-mask are not supported: UsageError at start).
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "data/sample_dataset.h"
#include "model/train_step.h"

namespace megaton::train {

struct BatchOptions {
  bool eod_mask_loss = false;
  int64_t eod = -1;  // end-of-document id (only used with eod_mask_loss)
  torch::Device device = torch::kCPU;
};

/// The samples `indices` of `ds` as one micro-batch: tokens, labels [b, s] int64, loss_mask [b, s] fp32.
model::MicroBatch make_micro_batch(const data::SampleDataset& ds, const std::vector<int64_t>& indices,
                                   const BatchOptions& o);

/// Parses --skip-train-iteration-range values "A-B" (inclusive, A <= B) into pairs; UsageError naming the value.
std::vector<std::pair<int64_t, int64_t>> parse_skip_ranges(const std::vector<std::string>& ranges);

}  // namespace megaton::train
