// The packed multitask order and rows equal an independent Python implementation of the fork's
// DecoderPackedMTFDataset (tests/data/packed_mtf_reference.py, with NumPy's own RandomState): several packs per epoch,
// rows carried across epochs, documents longer than a row skipped, a one-document dataset; each row's loss mask and
// attention masks (causal, and bidirectional over the inputs) element by element; plus a hand-worked row.
#include "data/packed_mtf.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/remove_tree.h"
#include "data/data_test_util.h"
#include "support/run_command.h"

namespace megaton::data {
namespace {

void expect_matches_reference(const std::vector<std::pair<int64_t, int64_t>>& sizes, int64_t num_samples,
                              int64_t seq_length, uint32_t seed) {
  const std::string py = testing_support::python_with("numpy");
  if (py.empty()) GTEST_SKIP() << "no python3 with NumPy";
  const auto dir = testing::scratch_dir("packedmtf");
  const int64_t pad = 3, rows = 6;
  nlohmann::json c = {
      {"num_samples", num_samples},        {"seq_length", seq_length}, {"seed", seed}, {"pad", pad}, {"rows", rows},
      {"lengths", nlohmann::json::array()}};
  std::vector<int64_t> lengths;
  for (const auto& [i, t] : sizes) {
    c["lengths"].push_back({i, t});
    lengths.push_back(i + t);
  }
  testing::write_file(dir / "case.json", c.dump());
  const std::string script = std::string(MEGATON_SOURCE_DIR) + "/tests/data/packed_mtf_reference.py";
  const std::string out = testing_support::run_command(py + " '" + script + "' '" + (dir / "case.json").string() + "'");
  nlohmann::json ref;
  ASSERT_NO_THROW(ref = nlohmann::json::parse(out)) << out;

  const PackedMtfIndex idx = build_packed_mtf_index(lengths, num_samples, seq_length, seed);
  EXPECT_EQ(idx.shuffle_idx, ref.at("shuffle_idx").get<std::vector<int64_t>>());
  ASSERT_EQ(idx.sample_idx.size(), ref.at("sample_idx").size());
  for (size_t i = 0; i < idx.sample_idx.size(); ++i)
    EXPECT_EQ((std::vector<int64_t>{idx.sample_idx[i][0], idx.sample_idx[i][1]}),
              ref.at("sample_idx")[i].get<std::vector<int64_t>>())
        << "row " << i;
  EXPECT_GT(static_cast<int64_t>(idx.sample_idx.size()), num_samples);

  for (int64_t r = 0; r < rows && r < static_cast<int64_t>(idx.sample_idx.size()); ++r) {
    std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> docs;
    for (int64_t k = idx.sample_idx[r][0]; k < idx.sample_idx[r][1]; ++k) {
      const int64_t d = idx.shuffle_idx[k];
      std::vector<int64_t> in, tg;
      for (int64_t j = 0; j < sizes[d].first + sizes[d].second; ++j)
        (j < sizes[d].first ? in : tg).push_back(1000 * d + j + 1);
      docs.emplace_back(in, tg);
    }
    const PackedRow row = pack_mtf_row(docs, seq_length, pad);
    const auto& want = ref.at("rows")[r];
    EXPECT_EQ(row.tokens, want.at("tokens").get<std::vector<int64_t>>()) << "row " << r;
    EXPECT_EQ(row.segment_ids, want.at("segment_ids").get<std::vector<int64_t>>()) << "row " << r;
    EXPECT_EQ(std::vector<int64_t>(row.is_inputs.begin(), row.is_inputs.end()),
              want.at("is_inputs").get<std::vector<int64_t>>())
        << "row " << r;
    // What the row trains on: the loss mask, and both attention masks element by element.
    const PackedMtfSample sample = packed_mtf_sample(row, pad);
    EXPECT_EQ(sample.loss_mask, want.at("loss_mask").get<std::vector<float>>()) << "row " << r;
    const int64_t s = seq_length - 1;
    for (const auto& [name, bidirectional] :
         {std::pair<const char*, bool>{"attend_causal", false}, std::pair<const char*, bool>{"attend_prefix", true}}) {
      const auto& m = want.at(name);
      ASSERT_EQ(static_cast<int64_t>(m.size()), s);
      int64_t wrong = 0;
      for (int64_t q = 0; q < s; ++q)
        for (int64_t k = 0; k < s; ++k)
          wrong += packed_mtf_attends(sample, q, k, bidirectional) != (m[q][k].get<int>() == 1);
      EXPECT_EQ(wrong, 0) << name << ", row " << r;
    }
  }
  remove_tree(dir.string(), nullptr);
}

TEST(PackedMtf, SeveralPacksPerEpochEqualTheForksOrder) {
  std::vector<std::pair<int64_t, int64_t>> sizes;
  for (int64_t d = 0; d < 37; ++d) sizes.push_back({1 + (d * 7) % 9, 1 + (d * 5) % 4});
  expect_matches_reference(sizes, 40, 32, 1234);
  expect_matches_reference(sizes, 5, 17, 7);
}

TEST(PackedMtf, DocumentsLongerThanARowAreSkipped) {
  std::vector<std::pair<int64_t, int64_t>> sizes = {{3, 2}, {30, 5}, {4, 4}, {2, 1}, {10, 30}, {6, 1}, {1, 1}};
  expect_matches_reference(sizes, 12, 16, 99);
  const PackedMtfIndex idx = build_packed_mtf_index({5, 35, 8, 3, 40, 7, 2}, 12, 16, 99);
  EXPECT_EQ(idx.skipped, (std::vector<int64_t>{1, 4}));
  for (const auto& [s, e] : idx.sample_idx)
    for (int64_t k = s; k < e; ++k) EXPECT_TRUE(idx.shuffle_idx[k] != 1 && idx.shuffle_idx[k] != 4);
}

TEST(PackedMtf, ASmallDatasetPacksAcrossEpochs) {
  // One document of 5 tokens, rows of 16: three copies per row, each row spanning epochs.
  expect_matches_reference({{3, 2}}, 4, 16, 1);
  const PackedMtfIndex idx = build_packed_mtf_index({5}, 4, 16, 1);
  EXPECT_EQ(idx.sample_idx.front(), (std::array<int64_t, 2>{0, 3}));
}

TEST(PackedMtf, NothingFitsIsADataError) {
  EXPECT_THROW(build_packed_mtf_index({20, 30}, 4, 16, 1), DataError);
  EXPECT_THROW(build_packed_mtf_index({}, 4, 16, 1), DataError);
}

TEST(PackedMtf, ARowByHand) {
  // The fork's docstring example: [6, 7 | 8] and [3, 4 | 5] in a row of 7.
  const PackedRow row = pack_mtf_row({{{6, 7}, {8}}, {{3, 4}, {5}}}, 7, 0);
  EXPECT_EQ(row.tokens, (std::vector<int64_t>{6, 7, 8, 3, 4, 5, 0}));
  EXPECT_EQ(row.segment_ids, (std::vector<int64_t>{1, 1, 1, 2, 2, 2, 0}));
  EXPECT_EQ(row.is_inputs, (std::vector<uint8_t>{1, 1, 0, 1, 1, 0, 0}));
  EXPECT_THROW(pack_mtf_row({{{1, 2, 3}, {4, 5}}}, 4, 0), InternalError);
  // Training on it: labels shift by one; the loss counts target labels after a non-pad token: 8 (after 7), 5 (after
  // 4), and the pad after 5, as the fork does.
  const PackedMtfSample s = packed_mtf_sample(row, 0);
  EXPECT_EQ(s.tokens, (std::vector<int64_t>{6, 7, 8, 3, 4, 5}));
  EXPECT_EQ(s.labels, (std::vector<int64_t>{7, 8, 3, 4, 5, 0}));
  EXPECT_EQ(s.loss_mask, (std::vector<float>{0, 1, 0, 0, 1, 1}));
  // Position 0 (input 6) sees input 7 only bidirectionally; no position sees another document.
  EXPECT_FALSE(packed_mtf_attends(s, 0, 1, false));
  EXPECT_TRUE(packed_mtf_attends(s, 0, 1, true));
  EXPECT_FALSE(packed_mtf_attends(s, 1, 2, true));  // an input does not see the target after it
  EXPECT_FALSE(packed_mtf_attends(s, 3, 2, true));  // the second document does not see the first
  EXPECT_TRUE(packed_mtf_attends(s, 5, 3, false));
}

}  // namespace
}  // namespace megaton::data
