// The fork's DecoderPackedMTFDataset over preprocessed prompt data: PREFIX_inputs_document and PREFIX_targets_document
// (`megaton preprocess --json-keys inputs targets`), aligned document by document, packed into rows by
// data/packed_mtf.h's order.
//
// The split's documents [doc_begin, doc_end) are the index's documents 0..n-1. (The fork numbers every split's
// documents from the start of the whole dataset, so its valid and test splits read training documents; megaton reads
// the split's own.) Empty inputs or targets are packed as they are; the fork asserts on them.
//
// The index is built by global rank 0 and cached as .npy files next to the data (or in the cache directory), under
// the fork's names with megaton's key of the split's range and the data's shape (data/gpt_dataset.h):
//   PREFIX_{name}_indexmap_{ns}ns_{sl}sl_{seed}s_{key}k_decoder_packed_batch_idx.npy    [rows, 2] int64
//   PREFIX_{name}_indexmap_{ns}ns_{sl}sl_{seed}s_{key}k_decoder_packed_shuffle_idx.npy  [epochs * n] int64
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/log.h"
#include "data/gpt_dataset.h"
#include "data/indexed_dataset.h"
#include "data/npy.h"
#include "data/packed_mtf.h"
#include "data/sample_dataset.h"

namespace megaton::data {

class PackedMtfDataset : public SampleDataset {
 public:
  /// `row_length` is the packed row's tokens (the fork packs --seq-length + 1). DataError when the two datasets do not
  /// align, the range is invalid, no document fits a row, or the cache files are missing on a rank that does not
  /// build them or are not what this index writes.
  PackedMtfDataset(std::string name, std::shared_ptr<const MMapIndexedDataset> inputs,
                   std::shared_ptr<const MMapIndexedDataset> targets, int64_t doc_begin, int64_t doc_end,
                   int64_t num_samples, int64_t row_length, uint32_t seed, int64_t pad_id, const GptIndexCache& cache,
                   const Logger& log);

  /// Rows in the index (more than the samples asked for, as the fork builds it).
  int64_t size() const override { return rows_; }
  int seq_length() const override { return static_cast<int>(row_length_ - 1); }
  void get(int64_t i, int64_t* out) const override;
  bool packed() const override { return true; }
  void get_packed(int64_t i, int64_t* tokens, int64_t* segment_ids, uint8_t* is_inputs) const override;
  PackedRow row(int64_t i) const;
  const std::string& cache_prefix() const { return cache_prefix_; }

 private:
  std::string name_;
  std::shared_ptr<const MMapIndexedDataset> inputs_, targets_;
  int64_t doc_begin_, row_length_, pad_id_;
  std::string cache_prefix_;
  std::unique_ptr<NpyArray> sample_idx_, shuffle_idx_;
  int64_t rows_ = 0;
};

}  // namespace megaton::data
