// What the training loop reads: a dataset of fixed-length samples (seq_length + 1 int64 tokens each: inputs are
// tokens[:-1], labels tokens[1:]), and the sampler that walks it in Megatron's order from a consumed-samples count.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace megaton::data {

class SampleDataset {
 public:
  virtual ~SampleDataset() = default;
  virtual int64_t size() const = 0;
  virtual int seq_length() const = 0;
  /// Writes the seq_length+1 tokens of sample i to out.
  virtual void get(int64_t i, int64_t* out) const = 0;
  /// Whether samples are packed prompt pairs (data/packed_mtf_dataset.h), which also have segments.
  virtual bool packed() const { return false; }
  /// Packed samples: sample i's seq_length+1 tokens with each token's segment (1, 2, ... per prompt pair, 0 on
  /// padding) and whether it is an input token. InternalError for other datasets.
  virtual void get_packed(int64_t i, int64_t* tokens, int64_t* segment_ids, uint8_t* is_inputs) const;
  std::vector<int64_t> operator[](int64_t i) const {
    std::vector<int64_t> v(static_cast<size_t>(seq_length()) + 1);
    get(i, v.data());
    return v;
  }
};

/// MegatronPretrainingSampler (--dataloader-type single): global samples consumed..total-1 in order, in groups of
/// micro_batch_size * dp_size; DP rank r takes group[r*mbs, (r+1)*mbs); a last partial group is dropped. Resuming
/// is constructing it with the checkpointed consumed-samples count.
class PretrainingSampler {
 public:
  PretrainingSampler(int64_t total_samples, int64_t consumed_samples, int64_t micro_batch_size, int dp_rank,
                     int dp_size);
  /// The next micro-batch of sample indices for this rank; false when fewer than a whole group remain.
  bool next(std::vector<int64_t>& indices);
  int64_t consumed_samples() const { return consumed_; }

 private:
  int64_t total_, consumed_, mbs_;
  int dp_rank_, dp_size_;
};

}  // namespace megaton::data
