// Megatron's documents inside a sample (get_ltor_masks_and_position_ids with --reset-position-ids /
// --reset-attention-mask): a document ends at each end-of-document token, which is its last token.
#pragma once
#include <cstdint>

namespace megaton::data {

/// For the s tokens of one row: each token's position inside its document and its document's index in the row.
/// Returns whether a document ends before the row's last token (the row holds a boundary).
bool document_positions(const int64_t* tokens, int64_t s, int64_t eod, int64_t* position, int64_t* document);

}  // namespace megaton::data
