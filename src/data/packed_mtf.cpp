#include "data/packed_mtf.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "core/error.h"
#include "data/numpy_random.h"

namespace megaton::data {

PackedMtfIndex build_packed_mtf_index(const std::vector<int64_t>& lengths, int64_t num_samples, int64_t seq_length,
                                      uint32_t seed) {
  const int64_t n = static_cast<int64_t>(lengths.size());
  MEGATON_CHECK(n > 0, DataError, "packed multitask data: the split has no documents");
  MEGATON_CHECK(seq_length > 0, UsageError, "--seq-length must be > 0");
  std::set<int64_t> too_long;
  for (int64_t d = 0; d < n; ++d)
    if (lengths[d] > seq_length) too_long.insert(d);
  MEGATON_CHECK(static_cast<int64_t>(too_long.size()) < n, DataError, "packed multitask data: all ", n,
                " documents are longer than --seq-length ", seq_length, " (inputs + targets); none can be packed");

  PackedMtfIndex out;
  out.skipped.assign(too_long.begin(), too_long.end());
  NumpyRandomState rng(seed);
  int64_t row_length = 0, row_start = 0;  // the open row, carried across epochs
  while (static_cast<int64_t>(out.sample_idx.size()) <= num_samples) {
    std::vector<int64_t> ids(static_cast<size_t>(n));
    std::iota(ids.begin(), ids.end(), int64_t{0});
    rng.shuffle(ids.data(), ids.size());
    const int64_t offset = out.epochs * n;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t at = offset + i, len = lengths[ids[i]];
      row_length += len;
      if (row_length <= seq_length) continue;
      if (at > row_start) out.sample_idx.push_back({row_start, at});
      row_start = at;
      row_length = len;
      if (len > seq_length) {  // alone too long: skipped, the next row starts after it
        row_start = at + 1;
        row_length = 0;
      }
    }
    out.shuffle_idx.insert(out.shuffle_idx.end(), ids.begin(), ids.end());
    ++out.epochs;
  }
  return out;
}

PackedRow pack_mtf_row(const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>& documents,
                       int64_t seq_length, int64_t pad_id) {
  PackedRow row;
  row.tokens.assign(static_cast<size_t>(seq_length), pad_id);
  row.segment_ids.assign(static_cast<size_t>(seq_length), 0);
  row.is_inputs.assign(static_cast<size_t>(seq_length), 0);
  size_t at = 0;
  int64_t segment = 1;
  for (const auto& [inputs, targets] : documents) {
    MEGATON_ASSERT(at + inputs.size() + targets.size() <= static_cast<size_t>(seq_length),
                   "packed row overflows: ", at + inputs.size() + targets.size(), " tokens for --seq-length ",
                   seq_length);
    std::copy(inputs.begin(), inputs.end(), row.tokens.begin() + at);
    std::fill(row.is_inputs.begin() + at, row.is_inputs.begin() + at + inputs.size(), 1);
    std::copy(targets.begin(), targets.end(), row.tokens.begin() + at + inputs.size());
    const size_t len = inputs.size() + targets.size();
    std::fill(row.segment_ids.begin() + at, row.segment_ids.begin() + at + len, segment++);
    at += len;
  }
  return row;
}

PackedMtfSample packed_mtf_sample(const PackedRow& row, int64_t pad_id, bool eod_mask_loss, int64_t eod_id) {
  const size_t s = row.tokens.size();
  MEGATON_ASSERT(s >= 2, "a packed row of ", s, " tokens: it holds seq_length + 1");
  PackedMtfSample out;
  out.tokens.assign(row.tokens.begin(), row.tokens.end() - 1);
  out.labels.assign(row.tokens.begin() + 1, row.tokens.end());
  out.segment_ids.assign(row.segment_ids.begin(), row.segment_ids.end() - 1);
  out.is_inputs.assign(row.is_inputs.begin(), row.is_inputs.end() - 1);
  out.loss_mask.resize(s - 1);
  for (size_t i = 0; i + 1 < s; ++i) {
    const bool counts = !row.is_inputs[i + 1] && out.tokens[i] != pad_id && !(eod_mask_loss && out.tokens[i] == eod_id);
    out.loss_mask[i] = counts ? 1.0f : 0.0f;
  }
  return out;
}

bool packed_mtf_attends(const PackedMtfSample& s, int64_t q, int64_t k, bool bidirectional_inputs) {
  const int64_t seg = s.segment_ids[static_cast<size_t>(q)];
  if (seg == 0 || s.segment_ids[static_cast<size_t>(k)] != seg) return false;
  return k <= q || (bidirectional_inputs && s.is_inputs[static_cast<size_t>(q)] && s.is_inputs[static_cast<size_t>(k)]);
}

}  // namespace megaton::data
