#include "data/packed_mtf_dataset.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace fs = std::filesystem;

namespace megaton::data {

PackedMtfDataset::PackedMtfDataset(std::string name, std::shared_ptr<const MMapIndexedDataset> inputs,
                                   std::shared_ptr<const MMapIndexedDataset> targets, int64_t doc_begin,
                                   int64_t doc_end, int64_t num_samples, int64_t row_length, uint32_t seed,
                                   int64_t pad_id, const GptIndexCache& cache, const Logger& log)
    : name_(std::move(name)),
      inputs_(std::move(inputs)),
      targets_(std::move(targets)),
      doc_begin_(doc_begin),
      row_length_(row_length),
      pad_id_(pad_id) {
  MEGATON_CHECK(inputs_->size() == targets_->size(), DataError, inputs_->prefix(), " holds ", inputs_->size(),
                " documents but ", targets_->prefix(), " holds ", targets_->size(),
                "; inputs and targets are preprocessed together (--json-keys inputs targets)");
  MEGATON_CHECK(doc_begin >= 0 && doc_begin < doc_end && doc_end <= static_cast<int64_t>(inputs_->size()), DataError,
                inputs_->prefix(), ": split '", name_, "' has an empty or invalid document range [", doc_begin, ", ",
                doc_end, ")");
  MEGATON_CHECK(num_samples > 0, UsageError, "split '", name_, "' asks for ", num_samples, " samples");
  MEGATON_CHECK(row_length > 0 && row_length < (int64_t{1} << 31), UsageError, "packed rows of ", row_length,
                " tokens");
  if (!cache.cache_dir.empty()) fs::create_directories(cache.cache_dir);
  cache_prefix_ = gpt_index_cache_prefix(inputs_->prefix(), cache.cache_dir, name_, num_samples,
                                         static_cast<int>(row_length), seed, doc_begin, doc_end, *inputs_);
  const std::string f_rows = cache_prefix_ + "_decoder_packed_batch_idx.npy",
                    f_shuffle = cache_prefix_ + "_decoder_packed_shuffle_idx.npy";
  if (!fs::exists(f_rows) || !fs::exists(f_shuffle)) {
    MEGATON_CHECK(cache.build, DataError, "packed sample index '", f_rows, "' not found; it is built by global rank 0 ",
                  "before the other ranks load it");
    std::vector<int64_t> lengths(static_cast<size_t>(doc_end - doc_begin));
    for (int64_t d = doc_begin; d < doc_end; ++d)
      lengths[d - doc_begin] = int64_t{inputs_->item_size(d)} + targets_->item_size(d);
    PackedMtfIndex idx;
    try {
      idx = build_packed_mtf_index(lengths, num_samples, row_length, seed);
    } catch (const DataError& e) {
      throw DataError(str(inputs_->prefix(), ": split '", name_, "': ", e.what()));
    }
    if (!idx.skipped.empty())
      log.warn(" > ", name_, ": ", idx.skipped.size(), " documents longer than a row of ", row_length,
               " tokens are skipped (as the fork skips them)");
    const int64_t rows = static_cast<int64_t>(idx.sample_idx.size());
    write_npy(f_rows, "<i8", {rows, 2}, idx.sample_idx.data(), 8);
    write_npy(f_shuffle, "<i8", {static_cast<int64_t>(idx.shuffle_idx.size())}, idx.shuffle_idx.data(), 8);
    log.info(" > built ", name_, " packed index: ", idx.epochs, " epochs, ", rows, " rows of ", row_length, " tokens");
  }
  sample_idx_ = std::make_unique<NpyArray>(f_rows);
  shuffle_idx_ = std::make_unique<NpyArray>(f_shuffle);
  MEGATON_CHECK(sample_idx_->descr() == "<i8" && sample_idx_->shape().size() == 2 && sample_idx_->shape()[1] == 2 &&
                    shuffle_idx_->descr() == "<i8" && shuffle_idx_->shape().size() == 1,
                DataError, cache_prefix_,
                "_decoder_packed_*.npy: unexpected dtypes or shapes (delete them to rebuild)");
  rows_ = sample_idx_->shape()[0];
}

PackedRow PackedMtfDataset::row(int64_t i) const {
  MEGATON_ASSERT(i >= 0 && i < rows_, "packed row ", i, " of ", rows_);
  int64_t span[2];
  std::memcpy(span, static_cast<const int64_t*>(sample_idx_->data()) + 2 * i, sizeof span);
  const int64_t n_shuffle = shuffle_idx_->numel();
  MEGATON_CHECK(0 <= span[0] && span[0] <= span[1] && span[1] <= n_shuffle, DataError, cache_prefix_,
                "_decoder_packed_batch_idx.npy: row ", i, " spans [", span[0], ", ", span[1], ") of ", n_shuffle,
                " (delete the file to rebuild)");
  std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> docs;
  int64_t tokens = 0;
  for (int64_t k = span[0]; k < span[1]; ++k) {
    int64_t d = 0;
    std::memcpy(&d, static_cast<const int64_t*>(shuffle_idx_->data()) + k, sizeof d);
    const int64_t doc = doc_begin_ + d;
    MEGATON_CHECK(d >= 0 && doc < static_cast<int64_t>(inputs_->size()), DataError, cache_prefix_,
                  "_decoder_packed_shuffle_idx.npy: document ", d,
                  " is outside the split (delete the file to rebuild)");
    docs.emplace_back(inputs_->get(static_cast<size_t>(doc)), targets_->get(static_cast<size_t>(doc)));
    tokens += static_cast<int64_t>(docs.back().first.size() + docs.back().second.size());
  }
  MEGATON_CHECK(tokens <= row_length_, DataError, cache_prefix_, "_decoder_packed_*.npy: row ", i, " holds ", tokens,
                " tokens, more than ", row_length_, " (a stale index: delete the files to rebuild)");
  return pack_mtf_row(docs, row_length_, pad_id_);
}

void PackedMtfDataset::get(int64_t i, int64_t* out) const {
  const PackedRow r = row(i);
  std::copy(r.tokens.begin(), r.tokens.end(), out);
}

void PackedMtfDataset::get_packed(int64_t i, int64_t* tokens, int64_t* segment_ids, uint8_t* is_inputs) const {
  const PackedRow r = row(i);
  std::copy(r.tokens.begin(), r.tokens.end(), tokens);
  std::copy(r.segment_ids.begin(), r.segment_ids.end(), segment_ids);
  std::copy(r.is_inputs.begin(), r.is_inputs.end(), is_inputs);
}

}  // namespace megaton::data
