#include "data/blended_dataset.h"

#include <algorithm>

#include "core/error.h"

namespace megaton::data {

double numpy_sum(const double* a, size_t n) {
  if (n < 8) {
    double r = 0;
    for (size_t i = 0; i < n; ++i) r += a[i];
    return r;
  }
  if (n <= 128) {  // eight accumulators, then the tail
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    size_t i = 8;
    for (; i < n - n % 8; i += 8)
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  size_t half = n / 2;
  half -= half % 8;
  return numpy_sum(a, half) + numpy_sum(a + half, n - half);
}

void build_blending_indices(const std::vector<double>& weights_in, int64_t size, std::vector<uint8_t>& dataset_index,
                            std::vector<int64_t>& dataset_sample_index) {
  const size_t n = weights_in.size();
  MEGATON_CHECK(n >= 1 && n < 256, UsageError, "blending needs 1..255 datasets (got ", n, ")");
  for (double w : weights_in) MEGATON_CHECK(w >= 0, UsageError, "--data-path blend weight ", w, " is negative");
  const double sum = numpy_sum(weights_in.data(), n);  // BlendableDataset normalises with np.sum
  MEGATON_CHECK(sum > 0, UsageError, "--data-path blend weights sum to 0");
  std::vector<double> w(weights_in);
  for (double& x : w) x /= sum;
  std::vector<int64_t> count(n, 0);
  dataset_index.resize(static_cast<size_t>(size));
  dataset_sample_index.resize(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) {
    const double x = std::max(static_cast<double>(i), 1.0);
    size_t best = 0;
    double best_err = w[0] * x - static_cast<double>(count[0]);
    for (size_t d = 1; d < n; ++d) {
      const double err = w[d] * x - static_cast<double>(count[d]);
      if (err > best_err) best_err = err, best = d;
    }
    dataset_index[static_cast<size_t>(i)] = static_cast<uint8_t>(best);
    dataset_sample_index[static_cast<size_t>(i)] = count[best]++;
  }
}

BlendedDataset::BlendedDataset(std::vector<std::shared_ptr<const SampleDataset>> datasets, std::vector<double> weights)
    : datasets_(std::move(datasets)) {
  MEGATON_CHECK(!datasets_.empty() && datasets_.size() == weights.size(), UsageError, "blending: ", datasets_.size(),
                " datasets but ", weights.size(), " weights");
  int64_t size = 0;
  for (const auto& d : datasets_) {
    MEGATON_CHECK(d->seq_length() == datasets_.front()->seq_length(), InternalError,
                  "blended datasets differ in seq length");
    MEGATON_CHECK(d->packed() == datasets_.front()->packed(), InternalError,
                  "blending packed prompt datasets with unpacked ones");
    size += d->size();
  }
  build_blending_indices(weights, size, dataset_index_, dataset_sample_index_);
}

const SampleDataset& BlendedDataset::component(int64_t i, int64_t& j) const {
  MEGATON_CHECK(i >= 0 && i < size(), DataError, "blended sample ", i, " out of range (", size(), ")");
  const auto& ds = *datasets_[dataset_index_[static_cast<size_t>(i)]];
  j = dataset_sample_index_[static_cast<size_t>(i)];
  MEGATON_CHECK(j < ds.size(), DataError, "blended sample ", i, " maps to sample ", j, " of component ",
                int(dataset_index_[static_cast<size_t>(i)]), " which has only ", ds.size(),
                " samples (more samples consumed than the 0.5% head-room built for)");
  return ds;
}

void BlendedDataset::get(int64_t i, int64_t* out) const {
  int64_t j = 0;
  component(i, j).get(j, out);
}

void BlendedDataset::get_packed(int64_t i, int64_t* tokens, int64_t* segment_ids, uint8_t* is_inputs) const {
  int64_t j = 0;
  component(i, j).get_packed(j, tokens, segment_ids, is_inputs);
}

}  // namespace megaton::data
