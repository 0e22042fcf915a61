// Megatron's GPTDataset (gpt_dataset.py, inventory §3.6): a split's documents are concatenated in a shuffled order
// (doc_idx), cut into samples of seq_length+1 tokens that overlap by one token (sample_idx), and the samples are
// visited in a shuffled order (shuffle_idx). The three indices are built once (global rank 0) with NumPy's legacy
// MT19937 shuffles, bit-identical to Megatron, and cached as .npy files next to the data (or under
// --data-cache-path). Unlike Megatron, the cache name also carries a key of the split's document range and the
// dataset's size, so a changed --split or re-preprocessed data never picks up a stale index.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/log.h"
#include "data/indexed_dataset.h"
#include "data/npy.h"
#include "data/sample_dataset.h"

namespace megaton::data {

// ~~~ the index algorithms (pure functions; tested against hand-computed Megatron results) ~~~

/// Smallest E >= 1 with (E*tokens_per_epoch - 1) / seq_length >= num_samples.
int64_t gpt_num_epochs(int64_t tokens_per_epoch, int seq_length, int64_t num_samples);

/// The last epoch is shuffled separately when it supplies fewer than int(kCutoffLastEpoch x samples per epoch).
inline constexpr double kCutoffLastEpoch = 0.95;

/// Megatron-DeepSpeed's separate_last_epoch decision (false when num_epochs == 1).
bool gpt_separate_last_epoch(int64_t tokens_per_epoch, int seq_length, int64_t num_samples, int64_t num_epochs);

struct GptIndices {
  std::vector<int32_t> doc_idx;      // [E * num_docs] document (item) ids, epoch by epoch, shuffled
  std::vector<int32_t> sample_idx;   // [S+1, 2] (position in doc_idx, token offset) where sample i starts
  std::vector<int64_t> shuffle_idx;  // [S] sample visiting order (stored as uint32 or int64 like Megatron)
  int64_t num_epochs = 0;
  bool separate_last_epoch = false;
};

/// Builds the three indices exactly as gpt_dataset._build_index_mappings for items `documents` (ids into `sizes`).
GptIndices build_gpt_indices(const std::vector<int32_t>& documents, const std::vector<int32_t>& sizes,
                             int64_t num_samples, int seq_length, uint32_t seed);

// ~~~ the dataset ~~~

struct GptIndexCache {
  std::string cache_dir;  // "" -> next to the data prefix
  bool build = true;      // this rank builds missing files (global rank 0); others only load
};

class GptDataset : public SampleDataset {
 public:
  /// Items [doc_begin, doc_end) of `data` form this split (`name` = train/valid/test). Builds or loads the cached
  /// indices; DataError when `cache.build` is false and the files are missing (a rank that did not wait for rank 0).
  GptDataset(std::string name, std::shared_ptr<const MMapIndexedDataset> data, int64_t doc_begin, int64_t doc_end,
             int64_t num_samples, int seq_length, uint32_t seed, const GptIndexCache& cache, const Logger& log);

  int64_t size() const override { return num_samples_in_index_; }
  int seq_length() const override { return seq_length_; }
  void get(int64_t i, int64_t* out) const override;

  const std::string& name() const { return name_; }
  /// The cache file prefix ("..._indexmap_..."): doc_idx.npy, sample_idx.npy, shuffle_idx.npy are appended.
  const std::string& cache_prefix() const { return cache_prefix_; }
  int64_t num_epochs() const { return num_epochs_; }

 private:
  int64_t shuffle_at(int64_t i) const;
  std::string name_;
  std::shared_ptr<const MMapIndexedDataset> data_;
  int seq_length_;
  std::string cache_prefix_;
  std::unique_ptr<NpyArray> doc_idx_, sample_idx_, shuffle_idx_;
  const int32_t* doc_ptr_ = nullptr;
  const int32_t* sample_ptr_ = nullptr;
  bool shuffle64_ = false;
  int64_t num_samples_in_index_ = 0;
  int64_t num_epochs_ = 0;
};

/// The cache prefix for a split: "{dir}/{basename(prefix)}_{name}_indexmap_{ns}ns_{sl}sl_{seed}s_{key}k".
std::string gpt_index_cache_prefix(const std::string& data_prefix, const std::string& cache_dir,
                                   const std::string& name, int64_t num_samples, int seq_length, uint32_t seed,
                                   int64_t doc_begin, int64_t doc_end, const MMapIndexedDataset& data);

}  // namespace megaton::data
