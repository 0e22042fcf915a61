#include "data/gpt_dataset.h"

#include <filesystem>
#include <numeric>

#include "core/error.h"
#include "core/timer.h"
#include "data/numpy_random.h"

namespace megaton::data {

namespace fs = std::filesystem;

int64_t gpt_num_epochs(int64_t tokens_per_epoch, int seq_length, int64_t num_samples) {
  MEGATON_CHECK(tokens_per_epoch > 1, DataError, "a split with ", tokens_per_epoch,
                " tokens cannot make any sample; use more data or change --split");
  int64_t e = 0, total = 0;
  for (;;) {
    ++e;
    total += tokens_per_epoch;
    if ((total - 1) / seq_length >= num_samples) return e;
  }
}

bool gpt_separate_last_epoch(int64_t tokens_per_epoch, int seq_length, int64_t num_samples, int64_t num_epochs) {
  if (num_epochs == 1) return false;
  const int64_t from_epochs_minus_one = ((num_epochs - 1) * tokens_per_epoch - 1) / seq_length;
  const int64_t last_epoch_num_samples = num_samples - from_epochs_minus_one;
  const int64_t per_epoch = (tokens_per_epoch - 1) / seq_length;
  MEGATON_ASSERT(last_epoch_num_samples >= 0, "last epoch samples ", last_epoch_num_samples);
  // (E x tokens - 1) / seq can exceed the samples of E-1 epochs plus one epoch's (tokens - 1) / seq by one; the fork
  // asserts on it too.
  MEGATON_CHECK(last_epoch_num_samples <= per_epoch, DataError, num_samples, " samples of ", seq_length,
                " tokens need ", num_epochs, " epochs of ", tokens_per_epoch, " tokens with ", last_epoch_num_samples,
                " samples from the last, but an epoch holds only ", per_epoch,
                " (Megatron-DeepSpeed refuses this count too)",
                per_epoch > 0 ? str("; ask for ", num_samples - 1, " samples") : std::string());
  // Megatron-DeepSpeed's cutoff_last_epoch (gpt_dataset.py); NVIDIA's Megatron-LM uses 0.80.
  return last_epoch_num_samples < static_cast<int64_t>(kCutoffLastEpoch * static_cast<double>(per_epoch));
}

namespace {

void build_doc_idx(const std::vector<int32_t>& documents, int64_t num_epochs, NumpyRandomState& rng,
                   std::vector<int32_t>& out) {
  const size_t start = out.size();
  for (int64_t e = 0; e < num_epochs; ++e) out.insert(out.end(), documents.begin(), documents.end());
  rng.shuffle(out.data() + start, out.size() - start);
}

}  // namespace

GptIndices build_gpt_indices(const std::vector<int32_t>& documents, const std::vector<int32_t>& sizes,
                             int64_t num_samples, int seq_length, uint32_t seed) {
  MEGATON_CHECK(seq_length > 0, UsageError, "--seq-length must be > 0");
  int64_t tokens_per_epoch = 0;
  for (int32_t d : documents) tokens_per_epoch += sizes[static_cast<size_t>(d)];
  GptIndices r;
  r.num_epochs = gpt_num_epochs(tokens_per_epoch, seq_length, num_samples);
  r.separate_last_epoch = gpt_separate_last_epoch(tokens_per_epoch, seq_length, num_samples, r.num_epochs);
  NumpyRandomState rng(seed);
  // doc_idx
  if (!r.separate_last_epoch) {
    build_doc_idx(documents, r.num_epochs, rng, r.doc_idx);
  } else {
    build_doc_idx(documents, r.num_epochs - 1, rng, r.doc_idx);
    build_doc_idx(documents, 1, rng, r.doc_idx);
  }
  // sample_idx (helpers.cpp build_sample_idx)
  const int64_t S = (r.num_epochs * tokens_per_epoch - 1) / seq_length;
  MEGATON_CHECK(r.doc_idx.size() < (1ull << 31), DataError, "doc_idx has ", r.doc_idx.size(),
                " entries; Megatron's int32 sample_idx cannot address it (use fewer samples or larger documents)");
  r.sample_idx.resize(static_cast<size_t>(2 * (S + 1)));
  int64_t doc_i = 0;
  int32_t offset = 0;
  r.sample_idx[0] = 0, r.sample_idx[1] = 0;
  for (int64_t s = 1; s <= S; ++s) {
    int32_t remaining = seq_length + 1;
    while (remaining != 0) {
      const int32_t doc_len = sizes[static_cast<size_t>(r.doc_idx[static_cast<size_t>(doc_i)])] - offset;
      remaining -= doc_len;
      if (remaining <= 0) {
        offset += remaining + doc_len - 1;
        remaining = 0;
      } else {
        ++doc_i;
        offset = 0;
      }
    }
    r.sample_idx[static_cast<size_t>(2 * s)] = static_cast<int32_t>(doc_i);
    r.sample_idx[static_cast<size_t>(2 * s + 1)] = offset;
  }
  // shuffle_idx
  const int64_t first = r.separate_last_epoch ? ((r.num_epochs - 1) * tokens_per_epoch - 1) / seq_length : S;
  r.shuffle_idx.resize(static_cast<size_t>(S));
  std::iota(r.shuffle_idx.begin(), r.shuffle_idx.end(), int64_t{0});
  rng.shuffle(r.shuffle_idx.data(), static_cast<uint64_t>(first));
  if (first < S) rng.shuffle(r.shuffle_idx.data() + first, static_cast<uint64_t>(S - first));
  return r;
}

std::string gpt_index_cache_prefix(const std::string& data_prefix, const std::string& cache_dir,
                                   const std::string& name, int64_t num_samples, int seq_length, uint32_t seed,
                                   int64_t doc_begin, int64_t doc_end, const MMapIndexedDataset& data) {
  // FNV-1a over what else changes the indices: the split's item range and the data's shape.
  uint64_t h = 1469598103934665603ull;
  for (int64_t v : {doc_begin, doc_end, static_cast<int64_t>(data.size()), data.num_tokens(),
                    static_cast<int64_t>(data.doc_idx_size())}) {
    for (int b = 0; b < 8; ++b) h = (h ^ ((static_cast<uint64_t>(v) >> (8 * b)) & 0xFF)) * 1099511628211ull;
  }
  char key[17];
  std::snprintf(key, sizeof(key), "%08llx", static_cast<unsigned long long>(h & 0xFFFFFFFFull));
  const fs::path base =
      cache_dir.empty() ? fs::path(data_prefix) : fs::path(cache_dir) / fs::path(data_prefix).filename();
  return str(base.string(), "_", name, "_indexmap_", num_samples, "ns_", seq_length, "sl_", seed, "s_", key, "k");
}

GptDataset::GptDataset(std::string name, std::shared_ptr<const MMapIndexedDataset> data, int64_t doc_begin,
                       int64_t doc_end, int64_t num_samples, int seq_length, uint32_t seed, const GptIndexCache& cache,
                       const Logger& log)
    : name_(std::move(name)), data_(std::move(data)), seq_length_(seq_length) {
  MEGATON_CHECK(doc_begin >= 0 && doc_begin < doc_end && doc_end <= static_cast<int64_t>(data_->size()), DataError,
                data_->prefix(), ": split '", name_, "' has an empty or invalid item range [", doc_begin, ", ", doc_end,
                ")");
  MEGATON_CHECK(num_samples > 0, UsageError, "split '", name_, "' asks for ", num_samples, " samples");
  if (!cache.cache_dir.empty()) fs::create_directories(cache.cache_dir);
  cache_prefix_ = gpt_index_cache_prefix(data_->prefix(), cache.cache_dir, name_, num_samples, seq_length, seed,
                                         doc_begin, doc_end, *data_);
  const std::string f_doc = cache_prefix_ + "_doc_idx.npy", f_sample = cache_prefix_ + "_sample_idx.npy",
                    f_shuffle = cache_prefix_ + "_shuffle_idx.npy";
  const bool have = fs::exists(f_doc) && fs::exists(f_sample) && fs::exists(f_shuffle);
  if (!have) {
    MEGATON_CHECK(cache.build, DataError, "sample index '", f_doc, "' (and sample_idx/shuffle_idx) not found; it is ",
                  "built by global rank 0 before the other ranks load it");
    Progress timer(0, "");
    log.info(" > building ", name_, " sample index for ", data_->prefix(), " (items ", doc_begin, "..", doc_end, ", ",
             num_samples, " samples of ", seq_length, " tokens, seed ", seed, ")");
    std::vector<int32_t> documents(static_cast<size_t>(doc_end - doc_begin));
    std::iota(documents.begin(), documents.end(), static_cast<int32_t>(doc_begin));
    GptIndices idx;
    try {
      idx = build_gpt_indices(documents, data_->sizes(), num_samples, seq_length, seed);
    } catch (const DataError& e) {
      int64_t tokens = 0;
      for (int32_t d : documents) tokens += data_->sizes()[static_cast<size_t>(d)];
      throw DataError(str(data_->prefix(), ": the ", name_, " split (items ", doc_begin, "..", doc_end, ": ",
                          documents.size(), " documents, ", tokens, " tokens) cannot give ", num_samples,
                          " samples of ", seq_length, " tokens: ", e.what(),
                          "; give this split more of the corpus in --split, use more data, or change --seq-length or ",
                          "the number of iterations"));
    }
    const int64_t S = static_cast<int64_t>(idx.shuffle_idx.size());
    write_npy(f_doc, "<i4", {static_cast<int64_t>(idx.doc_idx.size())}, idx.doc_idx.data(), 4);
    write_npy(f_sample, "<i4", {S + 1, 2}, idx.sample_idx.data(), 4);
    if (S + 1 >= static_cast<int64_t>(0xFFFFFFFFull - 1)) {
      write_npy(f_shuffle, "<i8", {S}, idx.shuffle_idx.data(), 8);
    } else {
      std::vector<uint32_t> s32(idx.shuffle_idx.begin(), idx.shuffle_idx.end());
      write_npy(f_shuffle, "<u4", {S}, s32.data(), 4);
    }
    log.info(" > built ", name_, " index: ", idx.num_epochs, " epochs, ", S, " samples",
             idx.separate_last_epoch ? " (last epoch shuffled separately)" : "", " in ", timer.seconds(), " s");
  }
  doc_idx_ = std::make_unique<NpyArray>(f_doc);
  sample_idx_ = std::make_unique<NpyArray>(f_sample);
  shuffle_idx_ = std::make_unique<NpyArray>(f_shuffle);
  MEGATON_CHECK(doc_idx_->descr() == "<i4" && sample_idx_->descr() == "<i4" && sample_idx_->shape().size() == 2 &&
                    sample_idx_->shape()[1] == 2 &&
                    (shuffle_idx_->descr() == "<u4" || shuffle_idx_->descr() == "<i8") &&
                    shuffle_idx_->numel() == sample_idx_->shape()[0] - 1,
                DataError, cache_prefix_, "_*.npy: unexpected dtypes or shapes (delete them to rebuild)");
  doc_ptr_ = static_cast<const int32_t*>(doc_idx_->data());
  sample_ptr_ = static_cast<const int32_t*>(sample_idx_->data());
  shuffle64_ = shuffle_idx_->descr() == "<i8";
  num_samples_in_index_ = shuffle_idx_->numel();
  num_epochs_ = static_cast<int64_t>(doc_idx_->numel()) / (doc_end - doc_begin);
}

int64_t GptDataset::shuffle_at(int64_t i) const {
  if (shuffle64_) return static_cast<const int64_t*>(shuffle_idx_->data())[i];
  return static_cast<const uint32_t*>(shuffle_idx_->data())[i];
}

void GptDataset::get(int64_t i, int64_t* out) const {
  MEGATON_CHECK(i >= 0 && i < num_samples_in_index_, DataError, "sample ", i, " out of range for ", name_,
                " dataset of ", num_samples_in_index_, " samples");
  const int64_t j = shuffle_at(i);
  const int32_t df = sample_ptr_[2 * j], of = sample_ptr_[2 * j + 1];
  const int32_t dl = sample_ptr_[2 * j + 2], ol = sample_ptr_[2 * j + 3];
  if (df == dl) {
    data_->get(static_cast<size_t>(doc_ptr_[df]), static_cast<size_t>(of), static_cast<size_t>(ol - of + 1), out);
    return;
  }
  size_t n = 0;
  const auto first = static_cast<size_t>(doc_ptr_[df]);
  const size_t first_len = static_cast<size_t>(data_->item_size(first) - of);
  data_->get(first, static_cast<size_t>(of), first_len, out);
  n += first_len;
  for (int32_t k = df + 1; k < dl; ++k) {
    const auto d = static_cast<size_t>(doc_ptr_[k]);
    const auto len = static_cast<size_t>(data_->item_size(d));
    data_->get(d, 0, len, out + n);
    n += len;
  }
  data_->get(static_cast<size_t>(doc_ptr_[dl]), 0, static_cast<size_t>(ol + 1), out + n);
  n += static_cast<size_t>(ol + 1);
  MEGATON_ASSERT(n == static_cast<size_t>(seq_length_) + 1, "sample ", i, " has ", n, " tokens");
}

}  // namespace megaton::data
