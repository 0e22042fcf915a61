// The packed multitask dataset over preprocessed inputs/targets: rows are the split's own documents packed in the
// order of data/packed_mtf.h; the index is cached under the fork's file names and loaded by the ranks that do not
// build it; misaligned data and a missing index are data errors.
#include "data/packed_mtf_dataset.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "core/remove_tree.h"
#include "data/data_test_util.h"

namespace megaton::data {
namespace {

// Document d: inputs of 1 + d % 5 tokens, targets of d % 3 tokens (empty for every third), token values 100 * d + j.
std::pair<std::vector<int32_t>, std::vector<int32_t>> document(int d) {
  std::vector<int32_t> in, tg;
  for (int j = 0; j < 1 + d % 5; ++j) in.push_back(100 * d + j);
  for (int j = 0; j < d % 3; ++j) tg.push_back(100 * d + 50 + j);
  return {in, tg};
}

void write_data(const std::filesystem::path& dir, int n_inputs, int n_targets) {
  IndexedDatasetBuilder in((dir / "p3_inputs_document").string(), 4), tg((dir / "p3_targets_document").string(), 4);
  for (int d = 0; d < n_inputs; ++d) {
    const auto [i, t] = document(d);
    in.add_item(i.data(), i.size());
    in.end_document();
    if (d < n_targets) {
      tg.add_item(t.data(), t.size());
      tg.end_document();
    }
  }
  in.finalize();
  tg.finalize();
}

std::shared_ptr<const MMapIndexedDataset> open(const std::filesystem::path& dir, const char* key) {
  return std::make_shared<const MMapIndexedDataset>((dir / (std::string("p3_") + key + "_document")).string());
}

TEST(PackedMtfDataset, RowsAreTheSplitsDocumentsInThePackedOrder) {
  const auto dir = testing::scratch_dir("mtfds");
  write_data(dir, 40, 40);
  const Logger log(0, 1, LogLevel::kWarning);
  const auto in = open(dir, "inputs"), tg = open(dir, "targets");
  // The valid split: documents 30..39.
  const PackedMtfDataset ds("valid", in, tg, 30, 40, 6, 16, 1234, -1, GptIndexCache{"", true}, log);
  EXPECT_TRUE(std::filesystem::exists(ds.cache_prefix() + "_decoder_packed_batch_idx.npy"));
  EXPECT_TRUE(std::filesystem::exists(ds.cache_prefix() + "_decoder_packed_shuffle_idx.npy"));
  std::vector<int64_t> lengths;
  for (int d = 30; d < 40; ++d) lengths.push_back(document(d).first.size() + document(d).second.size());
  const PackedMtfIndex idx = build_packed_mtf_index(lengths, 6, 16, 1234);
  ASSERT_EQ(ds.size(), static_cast<int64_t>(idx.sample_idx.size()));
  EXPECT_GT(ds.size(), 6);
  for (int64_t r = 0; r < ds.size(); ++r) {
    std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> docs;
    for (int64_t k = idx.sample_idx[r][0]; k < idx.sample_idx[r][1]; ++k) {
      const auto [i, t] = document(30 + static_cast<int>(idx.shuffle_idx[k]));
      docs.emplace_back(std::vector<int64_t>(i.begin(), i.end()), std::vector<int64_t>(t.begin(), t.end()));
    }
    const PackedRow want = pack_mtf_row(docs, 16, -1), got = ds.row(r);
    EXPECT_EQ(got.tokens, want.tokens) << "row " << r;
    EXPECT_EQ(got.segment_ids, want.segment_ids) << "row " << r;
    EXPECT_EQ(got.is_inputs, want.is_inputs) << "row " << r;
    for (size_t j = 0; j < got.tokens.size(); ++j)  // only the split's documents: token values 3000..3999, or pad
      EXPECT_TRUE(got.tokens[j] == -1 || (got.tokens[j] >= 3000 && got.tokens[j] < 4000)) << got.tokens[j];
  }
  // A rank that does not build loads the same index.
  const PackedMtfDataset again("valid", in, tg, 30, 40, 6, 16, 1234, -1, GptIndexCache{"", false}, log);
  ASSERT_EQ(again.size(), ds.size());
  EXPECT_EQ(again.row(3).tokens, ds.row(3).tokens);
  remove_tree(dir.string(), nullptr);
}

TEST(PackedMtfDataset, MisalignedDataAndAMissingIndexAreDataErrors) {
  const auto dir = testing::scratch_dir("mtfbad");
  write_data(dir, 12, 11);
  const Logger log(0, 1, LogLevel::kWarning);
  EXPECT_THROW(PackedMtfDataset("train", open(dir, "inputs"), open(dir, "targets"), 0, 11, 4, 16, 1, 0,
                                GptIndexCache{"", true}, log),
               DataError);
  remove_tree(dir.string(), nullptr);
  const auto dir2 = testing::scratch_dir("mtfmiss");
  write_data(dir2, 12, 12);
  try {
    PackedMtfDataset("train", open(dir2, "inputs"), open(dir2, "targets"), 0, 12, 4, 16, 1, 0, GptIndexCache{"", false},
                     log);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("_decoder_packed_batch_idx.npy' not found"), std::string::npos) << e.what();
  }
  remove_tree(dir2.string(), nullptr);
}

}  // namespace
}  // namespace megaton::data
