// GPT sample index: NumPy RandomState shuffles bit for bit, Megatron's epoch/sample arithmetic, the split rule,
// blending, caching (built once, keyed by the split), and the sampler's resume behaviour.
#include "data/gpt_dataset.h"

#include <gtest/gtest.h>

#include <numeric>

#include "core/error.h"
#include "core/remove_tree.h"
#include "data/blended_dataset.h"
#include "data/data_options.h"
#include "data/data_test_util.h"
#include "data/dataset_builder.h"
#include "data/indexed_dataset.h"
#include "data/numpy_random.h"
#include "data/split.h"

namespace megaton::data {
namespace {

std::vector<int> permutation(uint32_t seed, int n) {
  std::vector<int> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  NumpyRandomState rng(seed);
  rng.shuffle(v.data(), v.size());
  return v;
}

TEST(DataNumpyRandom, MatchesNumpyLegacyPermutation) {
  // np.random.RandomState(42).permutation(10) and RandomState(0).permutation(10), as printed by NumPy.
  EXPECT_EQ(permutation(42, 10), (std::vector<int>{8, 1, 5, 0, 7, 2, 9, 4, 3, 6}));
  EXPECT_EQ(permutation(0, 10), (std::vector<int>{2, 8, 4, 9, 1, 6, 7, 3, 0, 5}));
  // MT19937 init_genrand(5489): the first output is the well-known 3499211612.
  EXPECT_EQ(NumpyRandomState(5489).next_uint32(), 3499211612u);
}

TEST(DataSplit, MegatronRounding) {
  EXPECT_EQ(split_boundaries("949,50,1", 1000), (std::array<int64_t, 4>{0, 949, 999, 1000}));
  EXPECT_EQ(split_boundaries("1,1,1", 10), (std::array<int64_t, 4>{0, 4, 7, 10}));
  EXPECT_EQ(split_boundaries("1,1,2", 2), (std::array<int64_t, 4>{0, 1, 1, 2}));  // round(0.5) == 0: half to even
  EXPECT_EQ(split_boundaries("98/2", 100), (std::array<int64_t, 4>{0, 98, 100, 100}));
  EXPECT_EQ(split_boundaries("1", 7), (std::array<int64_t, 4>{0, 7, 7, 7}));
  EXPECT_EQ(split_boundaries("", 1000), (std::array<int64_t, 4>{0, 969, 999, 1000}));
  EXPECT_THROW(split_boundaries("9x,1", 10), UsageError);
  EXPECT_THROW(split_boundaries("0,0,0", 10), UsageError);
}

TEST(DataGptIndex, EpochsAndSeparateLastEpoch) {
  EXPECT_EQ(gpt_num_epochs(100, 10, 9), 1);   // (100-1)/10 = 9
  EXPECT_EQ(gpt_num_epochs(100, 10, 10), 2);  // needs one more token
  EXPECT_FALSE(gpt_separate_last_epoch(100, 10, 9, 1));
  // 2 epochs: from the first epoch (100-1)/10 = 9 samples; last epoch brings 1 of 9 per epoch (< int(0.95*9) = 8).
  EXPECT_TRUE(gpt_separate_last_epoch(100, 10, 10, 2));
  // Megatron-DeepSpeed's cutoff is 0.95: 7 of 9 (78%) and 8 of 9 (89%) sit between NVIDIA's 0.80 and it.
  EXPECT_TRUE(gpt_separate_last_epoch(100, 10, 16, 2));   // 7 < 8
  EXPECT_FALSE(gpt_separate_last_epoch(100, 10, 17, 2));  // 8 samples from the last epoch: not < 8
  // 19 samples need 2 epochs ((200-1)/10 = 19) with 10 from the last, one more than an epoch holds: the fork asserts.
  EXPECT_EQ(gpt_num_epochs(100, 10, 19), 2);
  EXPECT_THROW(gpt_separate_last_epoch(100, 10, 19, 2), megaton::DataError);
}

TEST(DataGptIndex, DocIdxIsNumpyShuffleAndSamplesTileTheStream) {
  // Ten documents of varied sizes, one epoch: doc_idx = RandomState(42).shuffle(arange(10)).
  std::vector<int32_t> sizes = {5, 3, 8, 1, 9, 4, 7, 2, 6, 10};
  std::vector<int32_t> docs(10);
  std::iota(docs.begin(), docs.end(), 0);
  const GptIndices idx = build_gpt_indices(docs, sizes, 10, 5, 42);
  EXPECT_EQ(idx.num_epochs, 1);
  EXPECT_EQ(std::vector<int32_t>(idx.doc_idx.begin(), idx.doc_idx.end()),
            (std::vector<int32_t>{8, 1, 5, 0, 7, 2, 9, 4, 3, 6}));
  // 55 tokens -> (55-1)/5 = 10 samples; sample j starts at token 5*j of the doc_idx-ordered stream.
  ASSERT_EQ(idx.sample_idx.size(), 2u * 11);
  std::vector<int64_t> start_of(11);
  for (int j = 0; j <= 10; ++j) {
    int64_t pos = 0;
    for (int32_t d = 0; d < idx.sample_idx[2 * j]; ++d) pos += sizes[idx.doc_idx[d]];
    pos += idx.sample_idx[2 * j + 1];
    EXPECT_EQ(pos, 5 * j) << "sample " << j;
  }
  // shuffle_idx is a permutation of 0..9.
  std::vector<int64_t> sorted = idx.shuffle_idx;
  std::sort(sorted.begin(), sorted.end());
  for (int j = 0; j < 10; ++j) EXPECT_EQ(sorted[j], j);
}

TEST(DataGptIndex, SeparateLastEpochShufflesItWithinItself) {
  std::vector<int32_t> sizes(20, 10);  // 200 tokens per epoch, seq 10 -> 19 samples per epoch
  std::vector<int32_t> docs(20);
  std::iota(docs.begin(), docs.end(), 0);
  const GptIndices idx = build_gpt_indices(docs, sizes, 21, 10, 1234);  // 2 epochs, 2 samples of the second
  ASSERT_TRUE(idx.separate_last_epoch);
  const int64_t first = (200 - 1) / 10;
  for (int64_t i = 0; i < first; ++i) EXPECT_LT(idx.shuffle_idx[i], first);
  for (size_t i = static_cast<size_t>(first); i < idx.shuffle_idx.size(); ++i) EXPECT_GE(idx.shuffle_idx[i], first);
  // doc_idx = epoch 1 shuffled, then epoch 2 shuffled separately: each half is a permutation of the documents.
  for (int half = 0; half < 2; ++half) {
    std::vector<int32_t> h(idx.doc_idx.begin() + 20 * half, idx.doc_idx.begin() + 20 * (half + 1));
    std::sort(h.begin(), h.end());
    EXPECT_EQ(h, docs);
  }
}

TEST(DataBlending, WeightsSumAsNumpySumsThem) {
  // np.sum([0.1] * 10) == 1.0 (pairwise), where a running sum gives 0.9999999999999999; the two agree below 8 values.
  const std::vector<double> tenth(10, 0.1);
  EXPECT_EQ(megaton::data::numpy_sum(tenth.data(), tenth.size()), 1.0);
  double running = 0;
  for (double w : tenth) running += w;
  EXPECT_EQ(running, 0.9999999999999999);
  const std::vector<double> a = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.1, 1.3};
  EXPECT_EQ(megaton::data::numpy_sum(a.data(), a.size()), 6.8999999999999995);  // np.sum(a)
  std::vector<double> many(300);
  for (size_t i = 0; i < many.size(); ++i) many[i] = 1.0 / double(i + 1);
  EXPECT_EQ(megaton::data::numpy_sum(many.data(), many.size()),
            6.282663880299504);  // np.sum(1 / arange(1, 301)); a running sum gives ...502
}

TEST(DataBlending, MegatronSelectionRule) {
  std::vector<uint8_t> di;
  std::vector<int64_t> dsi;
  build_blending_indices({3, 7}, 10, di, dsi);  // weights normalized to 0.3, 0.7
  EXPECT_EQ(di, (std::vector<uint8_t>{1, 0, 1, 1, 0, 1, 1, 0, 1, 1}));
  EXPECT_EQ(dsi[0], 0);
  EXPECT_EQ(dsi[1], 0);
  EXPECT_EQ(dsi[2], 1);
  EXPECT_EQ(std::count(di.begin(), di.end(), 0), 3);
  EXPECT_EQ(blend_component_samples({1000, 100, 10}, 0.3), (std::array<int64_t, 3>{302, 31, 4}));
  EXPECT_THROW(parse_data_path({"0.5", "a", "b"}), UsageError);
  EXPECT_THROW(parse_data_path({"x", "a"}), UsageError);
  const auto p = parse_data_path({"1", "a", "3", "b"});
  EXPECT_DOUBLE_EQ(p[0].first, 0.25);
  EXPECT_EQ(p[1].second, "b");
}

// A dataset whose token t of document d is 1000*d + t, so every sample shows where it came from.
std::string make_dataset(const std::filesystem::path& dir, const std::string& name, int docs, int len) {
  const std::string p = (dir / name).string();
  IndexedDatasetBuilder b(p, kInt32);
  for (int d = 0; d < docs; ++d) {
    std::vector<int32_t> t(static_cast<size_t>(len + d % 3));
    for (size_t k = 0; k < t.size(); ++k) t[k] = 1000 * d + static_cast<int32_t>(k);
    b.add_item(t.data(), t.size());
    b.end_document();
  }
  b.finalize();
  return p;
}

TEST(DataGptDataset, SamplesAreContiguousTokensAndIndexIsCachedBySplit) {
  const auto dir = testing::scratch_dir("gpt");
  const std::string p = make_dataset(dir, "corpus", 50, 20);
  data::DataOptions args;
  args.data_path = {p};
  args.split = "90,10,0";
  const Logger log(0, 1, LogLevel::kWarning);
  const auto sets = build_train_valid_test_datasets(args, 16, 1234, {200, 10, 0}, log, true, nullptr);
  ASSERT_TRUE(sets.train && sets.valid);
  EXPECT_FALSE(sets.test);
  EXPECT_GE(sets.train->size(), 200);
  const auto s = (*sets.train)[0];
  ASSERT_EQ(s.size(), 17u);
  // Within a document tokens increase by 1; across a boundary they jump to another document's token 0.
  for (size_t k = 1; k < s.size(); ++k)
    EXPECT_TRUE(s[k] == s[k - 1] + 1 || s[k] % 1000 == 0) << k << ": " << s[k - 1] << " -> " << s[k];
  // Validation samples only come from the valid documents 45..49.
  for (int64_t i = 0; i < sets.valid->size(); ++i)
    for (int64_t t : (*sets.valid)[i]) EXPECT_GE(t / 1000, 45);
  // Index files exist; loading again reuses them (same content), and another split gets another file.
  auto gd = std::dynamic_pointer_cast<const GptDataset>(sets.train);
  ASSERT_TRUE(gd);
  const auto f = gd->cache_prefix() + "_shuffle_idx.npy";
  ASSERT_TRUE(std::filesystem::exists(f));
  const auto mtime = std::filesystem::last_write_time(f);
  const auto again = build_train_valid_test_datasets(args, 16, 1234, {200, 10, 0}, log, false, nullptr);
  EXPECT_EQ(std::filesystem::last_write_time(f), mtime);
  for (int64_t i = 0; i < 20; ++i) EXPECT_EQ((*again.train)[i], (*sets.train)[i]);
  args.split = "80,20,0";
  const auto other = build_train_valid_test_datasets(args, 16, 1234, {200, 10, 0}, log, true, nullptr);
  EXPECT_NE(std::dynamic_pointer_cast<const GptDataset>(other.train)->cache_prefix(), gd->cache_prefix());
  // A non-building rank without the files is told what is missing.
  args.split = "70,30,0";
  EXPECT_THROW(build_train_valid_test_datasets(args, 16, 1234, {200, 10, 0}, log, false, nullptr), DataError);
  // Another seed changes the order.
  args.split = "90,10,0";
  const auto seeded = build_train_valid_test_datasets(args, 16, 99, {200, 10, 0}, log, true, nullptr);
  bool differs = false;
  for (int64_t i = 0; i < 10; ++i) differs |= (*seeded.train)[i] != (*sets.train)[i];
  EXPECT_TRUE(differs);
  megaton::remove_tree(dir);
}

TEST(DataGptDataset, BlendDrawsByWeight) {
  const auto dir = testing::scratch_dir("gpt");
  const std::string a = make_dataset(dir, "a", 30, 20), b = make_dataset(dir, "b", 40, 30);
  data::DataOptions args;
  args.data_path = {"0.25", a, "0.75", b};
  args.split = "1,0,0";
  const Logger log(0, 1, LogLevel::kWarning);
  const auto sets = build_train_valid_test_datasets(args, 8, 5, {400, 0, 0}, log, true, nullptr);
  auto blend = std::dynamic_pointer_cast<const BlendedDataset>(sets.train);
  ASSERT_TRUE(blend);
  int from_a = 0;
  for (int64_t i = 0; i < 400; ++i) from_a += blend->source(i).first == 0;
  EXPECT_EQ(from_a, 100);
  megaton::remove_tree(dir);
}

TEST(DataSampler, ResumesFromConsumedSamples) {
  PretrainingSampler full(100, 0, 2, 1, 2);  // DP rank 1 of 2, micro batch 2
  std::vector<int64_t> idx;
  std::vector<std::vector<int64_t>> seen;
  while (full.next(idx)) seen.push_back(idx);
  ASSERT_EQ(seen.size(), 25u);
  EXPECT_EQ(seen[0], (std::vector<int64_t>{2, 3}));
  PretrainingSampler resumed(100, 40, 2, 1, 2);
  ASSERT_TRUE(resumed.next(idx));
  EXPECT_EQ(idx, seen[10]);
  EXPECT_THROW(PretrainingSampler(100, 100, 2, 0, 1), DataError);
}

}  // namespace
}  // namespace megaton::data
