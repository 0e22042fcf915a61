#include "data/sample_dataset.h"

#include "core/error.h"

namespace megaton::data {

void SampleDataset::get_packed(int64_t, int64_t*, int64_t*, uint8_t*) const {
  throw InternalError("get_packed on a dataset of unpacked samples");
}

PretrainingSampler::PretrainingSampler(int64_t total_samples, int64_t consumed_samples, int64_t micro_batch_size,
                                       int dp_rank, int dp_size)
    : total_(total_samples), consumed_(consumed_samples), mbs_(micro_batch_size), dp_rank_(dp_rank), dp_size_(dp_size) {
  MEGATON_CHECK(total_ > 0, DataError, "no samples to consume (dataset of size ", total_, ")");
  MEGATON_CHECK(consumed_ >= 0 && consumed_ < total_, DataError, "consumed samples (", consumed_,
                ") must be less than the dataset size (", total_, ")");
  MEGATON_CHECK(mbs_ > 0 && dp_size_ > 0 && dp_rank_ >= 0 && dp_rank_ < dp_size_, UsageError,
                "sampler: bad micro batch size ", mbs_, " or data-parallel rank ", dp_rank_, "/", dp_size_);
}

bool PretrainingSampler::next(std::vector<int64_t>& indices) {
  const int64_t group = mbs_ * dp_size_;
  if (consumed_ + group > total_) return false;
  indices.resize(static_cast<size_t>(mbs_));
  for (int64_t k = 0; k < mbs_; ++k) indices[static_cast<size_t>(k)] = consumed_ + dp_rank_ * mbs_ + k;
  consumed_ += group;
  return true;
}

}  // namespace megaton::data
