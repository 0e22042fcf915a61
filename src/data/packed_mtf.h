// The sample order and packing of the fork's DecoderPackedMTFDataset (megatron/data/decoder_packed_mtf_dataset.py),
// what its finetune_t0.py trains on: (inputs, targets) prompt pairs packed greedily into rows of --seq-length.
//
// Order: each epoch is np.random.RandomState(seed).shuffle of the document ids 0..n-1 (one generator across epochs);
// the epochs' ids are concatenated (shuffle_idx) and cut into rows of consecutive documents (sample_idx[i] = [start,
// end) into shuffle_idx): a row closes when the next document would make it longer than seq_length, and a row still
// open at an epoch's end continues into the next epoch. A document longer than seq_length by itself is skipped. Epochs
// are added until there are more than num_samples rows.
//
// A row: the documents' input then target tokens, one after the other, padded with the pad id to seq_length;
// segment ids 1, 2, ... per document (0 on padding); is_inputs 1 on input tokens.
//
// The fork's document ids count from 0 in every split (it reads documents 0..n-1 of the dataset whatever the split's
// range); the caller decides what the ids index.
//
//   PackedMtfIndex idx = build_packed_mtf_index(lengths, num_samples, 2048, 1234);
//   PackedRow row = pack_mtf_row({{in0, tg0}, {in1, tg1}}, 2048, pad_id);
#pragma once
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

namespace megaton::data {

struct PackedMtfIndex {
  std::vector<int64_t> shuffle_idx;                // [epochs * n] document ids
  std::vector<std::array<int64_t, 2>> sample_idx;  // [rows, 2]: [start, end) into shuffle_idx
  std::vector<int64_t> skipped;                    // documents longer than seq_length (their ids, once each)
  int64_t epochs = 0;
};

/// `lengths[d]` = input tokens + target tokens of document d. DataError when no document fits in seq_length (the
/// fork loops forever then) or there are none.
PackedMtfIndex build_packed_mtf_index(const std::vector<int64_t>& lengths, int64_t num_samples, int64_t seq_length,
                                      uint32_t seed);

struct PackedRow {
  std::vector<int64_t> tokens;       // [seq_length] inputs, targets, ..., pad
  std::vector<int64_t> segment_ids;  // [seq_length] 1.. per document, 0 on padding
  std::vector<uint8_t> is_inputs;    // [seq_length] 1 on input tokens
};

/// One row from its documents' (input tokens, target tokens). InternalError when they do not fit (the index never
/// asks for that).
PackedRow pack_mtf_row(const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>& documents,
                       int64_t seq_length, int64_t pad_id);

/// What one packed row of seq_length + 1 tokens trains on, as the fork's get_batch_pipe
/// (finetune_t0_non_causal_decoder.py) makes it: the inputs are the row's first seq_length tokens, the labels the
/// last seq_length, and the loss counts a label only when it is not an input token and the token before it is not
/// padding (so the last document before the padding also learns to predict the first pad, as in the fork).
struct PackedMtfSample {
  std::vector<int64_t> tokens;       // [s] row tokens [0, s)
  std::vector<int64_t> labels;       // [s] row tokens [1, s]
  std::vector<float> loss_mask;      // [s] 1 where the loss counts
  std::vector<int64_t> segment_ids;  // [s] of the inputs
  std::vector<uint8_t> is_inputs;    // [s] of the inputs
};

/// `eod_mask_loss`: --eod-mask-loss, no loss where the input token is `eod_id`.
PackedMtfSample packed_mtf_sample(const PackedRow& row, int64_t pad_id, bool eod_mask_loss = false,
                                  int64_t eod_id = -1);

/// Whether position q attends to position k of a packed sample (get_packed_attention_mask): both in the same
/// document (segment id, never padding), and k <= q, or, with `bidirectional_inputs` (the non-causal decoder), both
/// input tokens.
bool packed_mtf_attends(const PackedMtfSample& s, int64_t q, int64_t k, bool bidirectional_inputs);

}  // namespace megaton::data
