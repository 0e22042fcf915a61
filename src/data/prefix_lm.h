// What the fork's pretrain_prefix_lm.py trains a row on: its split points (get_prefix_indices) and its masks and
// position ids (megatron/utils.py's get_ltor_masks_and_position_ids with prefix indices), for one row of s input
// tokens.
//
// Split points: per row, randint(1, s): the first p tokens attend to each other both ways. With
// --reset-attention-mask, per document: each document ending at an end-of-document token (a last partial one at s)
// draws randint(start + 1, eod index); an empty document (its end token alone), where the fork's randint raises,
// takes start + 1 without a draw. The draws come from Python's `random` (data/python_random.h), one per row or per
// document, in row order.
//
//   PythonRandom rng(seed);
//   auto prefix = prefix_lm_indices(tokens, eod, /*per_document=*/false, rng);
//   PrefixLmMasks m = prefix_lm_masks(tokens, eod, prefix, options);
#pragma once
#include <cstdint>
#include <vector>

#include "data/python_random.h"

namespace megaton::data {

/// get_prefix_indices for one row: one index per row, or one per document with `per_document`.
std::vector<int64_t> prefix_lm_indices(const std::vector<int64_t>& tokens, int64_t eod, bool per_document,
                                       PythonRandom& rng);

struct PrefixLmOptions {
  bool reset_position_ids = false;    // --reset-position-ids
  bool reset_attention_mask = false;  // --reset-attention-mask (per-document prefixes)
  bool eod_mask_loss = false;         // --eod-mask-loss
  bool loss_on_targets_only = false;  // --loss-on-targets-only
  bool reweight_loss = false;         // --reweight-loss-based-on-position-frequency
  bool attention_matrix = true;       // false: leave PrefixLmMasks::attends empty (training reads
                                      // prefix_lm_prefix_tokens instead of the s x s matrix)
};

struct PrefixLmMasks {
  std::vector<uint8_t> attends;       // [s * s] row-major: 1 where query q attends key k (attention_matrix)
  std::vector<float> loss_mask;       // [s]
  std::vector<int64_t> position_ids;  // [s]
};

/// Which tokens of the row lie in a prefix (each attends to every token of its prefix, later ones too): the first
/// prefix[0] tokens, or with `per_document` the tokens of each document before its prefix index.
std::vector<uint8_t> prefix_lm_prefix_tokens(const std::vector<int64_t>& tokens, int64_t eod,
                                             const std::vector<int64_t>& prefix, bool per_document);

/// get_ltor_masks_and_position_ids for one row with its prefix indices (one, or one per document).
PrefixLmMasks prefix_lm_masks(const std::vector<int64_t>& tokens, int64_t eod, const std::vector<int64_t>& prefix,
                              const PrefixLmOptions& o);

}  // namespace megaton::data
