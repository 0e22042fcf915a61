// Micro-batches from a sample dataset (Megatron's get_batch + get_ltor_masks_and_position_ids): each sample is
// seq_length + 1 tokens; tokens = sample[:-1], labels = sample[1:], loss mask 1 except on end-of-document tokens with
// --eod-mask-loss. Document boundaries, as Megatron draws them from the EOD tokens among `tokens`:
//   --reset-position-ids:   the positions restart at 0 after each EOD (position_ids [b, s]; else undefined: the
//                           model's 0..s-1);
//   --reset-attention-mask: no token attends across an EOD: token i attends to j iff j <= i and no EOD lies in
//                           [j, i). The micro-batch carries its documents (ops::Documents: each token's document
//                           index, the documents' cumulative lengths): on a GPU in half precision each document runs
//                           alone through the variable-length flash kernel; elsewhere (or --no-varlen-attention) each
//                           forward builds Megatron's [b, 1, s, s] mask of them. None (the model's causal attention and
//                           its fused causal kernels) when no sample of the micro-batch has an EOD before its last
//                           token.
// The prefix-LM and packed-prompt objectives make theirs in train/prompt_batches.h.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "data/data_options.h"
#include "data/sample_dataset.h"
#include "model/micro_batch.h"

namespace megaton::train {

struct BatchOptions {
  bool eod_mask_loss = false;
  bool reset_position_ids = false;
  bool reset_attention_mask = false;
  int64_t eod = -1;  // end-of-document id (needed by the three flags above)
  torch::Device device = torch::kCPU;
  int64_t seq_length = 0;  // > 0: only each sample's first seq_length tokens (curriculum learning; train/curriculum.h)
  data::Objective objective = data::Objective::kCausalLm;
  bool loss_on_targets_only = false;  // prefix-LM, finetune-t0
  bool reweight_loss = false;         // prefix-LM
  bool norm_target_loss = false;      // packed prompts
  int64_t pad = -1;                   // packed prompts: the padding id
  uint32_t seed = 0;                  // prefix-LM: --seed (each sample's split points are drawn from it)
  bool absolute_positions = true;     // learned position embeddings (packed prompts restart them per prompt)
};

/// The samples `indices` of `ds` as one micro-batch: tokens, labels [b, s] int64, loss_mask [b, s] fp32, and with the
/// reset flags position_ids [b, s] int64 / documents (see above).
model::MicroBatch make_micro_batch(const data::SampleDataset& ds, const std::vector<int64_t>& indices,
                                   const BatchOptions& o);

}  // namespace megaton::train
