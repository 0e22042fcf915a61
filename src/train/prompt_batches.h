// Micro-batches of the objectives beyond causal language modelling, as the fork's batch functions make them:
//   * prefix-LM (pretrain_prefix_lm.py's get_batch): each row (or, with --reset-attention-mask, each document) splits
//     at a point drawn from Python's random (data/prefix_lm.h); the tokens before it attend to each other both ways,
//     the rest causally; --loss-on-targets-only drops the prefix's loss, --reweight-loss-based-on-position-frequency
//     weighs early positions up. The split points of sample i are drawn from random.seed((seed << 32) + i): the same
//     at every TP x PP x DP layout and on every pipeline stage (docs/megatron-compat.md).
//   * packed prompts (finetune_t0.py, finetune_t0_non_causal_decoder.py's get_batch_pipe): rows of prompt pairs
//     (data/packed_mtf.h); attention stays inside each pair (its segment); the non-causal variant lets each pair's
//     inputs attend to each other both ways; the loss counts targets (always for the non-causal variant, with
//     --loss-on-targets-only for the causal one) and never padding; --norm-target-loss gives each run of loss
//     tokens a total weight of 1; learned position embeddings restart at each segment.
// Every micro-batch carries its documents (ops::Documents), which every pipeline stage reads.
#pragma once
#include <cstdint>
#include <vector>

#include "data/sample_dataset.h"
#include "model/micro_batch.h"
#include "train/batches.h"

namespace megaton::train {

/// The samples `indices` of `ds`, their first s tokens, as one micro-batch of o.objective (not kCausalLm).
model::MicroBatch make_prompt_micro_batch(const data::SampleDataset& ds, const std::vector<int64_t>& indices, int64_t s,
                                          const BatchOptions& o);

/// The fork's fast_normalize over a flattened loss mask: each run of equal consecutive values is divided by the
/// run's length (a run of n loss tokens weighs 1 in total; zeros stay zero). Runs continue across rows, as in the
/// fork, which flattens the micro-batch first.
void normalize_per_target(float* mask, int64_t n);

}  // namespace megaton::train
