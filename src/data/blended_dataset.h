// Megatron's BlendableDataset (--data-path W1 P1 W2 P2 ..., inventory §3.7): sample i of the blend comes from
// dataset d = argmax_d (w_d * max(i,1) - count_d) (first wins ties), as its count_d-th sample. Deterministic, no
// further shuffling, not cached (it is cheap). size = sum of the components' sizes, as in Megatron-DeepSpeed.
#pragma once
#include <memory>
#include <vector>

#include "data/sample_dataset.h"

namespace megaton::data {

/// NumPy's np.sum of n float64 values (pairwise: eight accumulators per block of up to 128), bit for bit: the fork's
/// BlendableDataset normalises its weights with it.
double numpy_sum(const double* a, size_t n);

/// dataset_index[i] and dataset_sample_index[i] for i < size (helpers.build_blending_indices); weights normalised
/// as BlendableDataset normalises them.
void build_blending_indices(const std::vector<double>& weights, int64_t size, std::vector<uint8_t>& dataset_index,
                            std::vector<int64_t>& dataset_sample_index);

class BlendedDataset : public SampleDataset {
 public:
  BlendedDataset(std::vector<std::shared_ptr<const SampleDataset>> datasets, std::vector<double> weights);
  int64_t size() const override { return static_cast<int64_t>(dataset_index_.size()); }
  int seq_length() const override { return datasets_.front()->seq_length(); }
  void get(int64_t i, int64_t* out) const override;
  bool packed() const override { return datasets_.front()->packed(); }
  void get_packed(int64_t i, int64_t* tokens, int64_t* segment_ids, uint8_t* is_inputs) const override;
  /// Which component and which of its samples blend sample i is.
  std::pair<int, int64_t> source(int64_t i) const { return {dataset_index_[i], dataset_sample_index_[i]}; }

 private:
  const SampleDataset& component(int64_t i, int64_t& j) const;  // blend sample i is sample j of the result

  std::vector<std::shared_ptr<const SampleDataset>> datasets_;
  std::vector<uint8_t> dataset_index_;
  std::vector<int64_t> dataset_sample_index_;
};

}  // namespace megaton::data
