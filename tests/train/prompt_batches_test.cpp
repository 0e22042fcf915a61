// The prefix-LM and packed-prompt micro-batches (train/prompt_batches.h) carry what the fork's batch functions make,
// element by element: the attention mask of their documents equals data/prefix_lm.h's and data/packed_mtf.h's
// matrices (both checked against NumPy ports of the fork), the loss masks equal theirs, positions restart per prompt,
// and --norm-target-loss divides as the fork's fast_normalize.
#include "train/prompt_batches.h"

#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "data/packed_mtf.h"
#include "data/prefix_lm.h"
#include "data/python_random.h"
#include "train/batches.h"

namespace megaton::train {
namespace {

constexpr int64_t kEod = 9, kPad = 8;

// Rows of s + 1 tokens held in memory; packed rows also keep their segments.
class MemoryDataset : public data::SampleDataset {
 public:
  explicit MemoryDataset(int s) : s_(s) {}
  void add(std::vector<int64_t> tokens) { rows_.push_back({std::move(tokens), {}, {}}); }
  void add(const data::PackedRow& r) { rows_.push_back(r), packed_ = true; }
  int64_t size() const override { return static_cast<int64_t>(rows_.size()); }
  int seq_length() const override { return s_; }
  void get(int64_t i, int64_t* out) const override { std::copy(rows_[i].tokens.begin(), rows_[i].tokens.end(), out); }
  bool packed() const override { return packed_; }
  void get_packed(int64_t i, int64_t* t, int64_t* seg, uint8_t* in) const override {
    get(i, t);
    std::copy(rows_[i].segment_ids.begin(), rows_[i].segment_ids.end(), seg);
    std::copy(rows_[i].is_inputs.begin(), rows_[i].is_inputs.end(), in);
  }

 private:
  int s_;
  bool packed_ = false;
  std::vector<data::PackedRow> rows_;
};

std::vector<int64_t> random_tokens(std::mt19937& g, int64_t n, double eod_rate) {
  std::vector<int64_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = std::uniform_real_distribution<>(0, 1)(g) < eod_rate ? kEod : g() % 8;  // 0..7, or EOD
  return t;
}

TEST(PromptBatches, NormalizePerTargetAsTheForksFastNormalize) {
  // fast_normalize's own example: [0,0,0,1,1,0,0,1,0,0,1,1,1] -> [0,0,0,0.5,0.5,0,0,1,0,0,1/3,1/3,1/3].
  std::vector<float> m = {0, 0, 0, 1, 1, 0, 0, 1, 0, 0, 1, 1, 1};
  normalize_per_target(m.data(), static_cast<int64_t>(m.size()));
  const std::vector<float> want = {0, 0, 0, 0.5f, 0.5f, 0, 0, 1, 0, 0, 1.0f / 3, 1.0f / 3, 1.0f / 3};
  EXPECT_EQ(m, want);
}

void expect_prefix_lm_batch(bool per_document, bool targets_only, bool reweight) {
  const int s = 24;
  MemoryDataset ds(s);
  std::mt19937 g(7);
  for (int i = 0; i < 6; ++i) ds.add(random_tokens(g, s + 1, per_document ? 0.15 : 0.0));
  BatchOptions o;
  o.objective = data::Objective::kPrefixLm;
  o.eod = kEod;
  o.reset_attention_mask = per_document;
  o.reset_position_ids = per_document;
  o.eod_mask_loss = true;
  o.loss_on_targets_only = targets_only;
  o.reweight_loss = reweight;
  o.seed = 1234;
  const std::vector<int64_t> indices = {5, 2, 0};
  const model::MicroBatch mb = make_micro_batch(ds, indices, o);
  ASSERT_TRUE(mb.documents.defined());
  const torch::Tensor mask = mb.documents.mask();  // [b, 1, s, s] true: masked
  for (size_t r = 0; r < indices.size(); ++r) {
    const std::vector<int64_t> row = ds[indices[r]];
    const std::vector<int64_t> tokens(row.begin(), row.begin() + s);
    // The fork draws from random.seed(seed); megaton from random.seed((seed << 32) + sample).
    data::PythonRandom rng((uint64_t{1234} << 32) + static_cast<uint64_t>(indices[r]));
    const auto split = data::prefix_lm_indices(tokens, kEod, per_document, rng);
    const data::PrefixLmMasks m =
        data::prefix_lm_masks(tokens, kEod, split, {per_document, per_document, true, targets_only, reweight, true});
    for (int64_t q = 0; q < s; ++q) {
      EXPECT_FLOAT_EQ(mb.loss_mask[r][q].item<float>(), m.loss_mask[q]) << "row " << r << " position " << q;
      if (per_document) {
        EXPECT_EQ(mb.position_ids[r][q].item<int64_t>(), m.position_ids[q]);
      }
      for (int64_t k = 0; k < s; ++k)
        ASSERT_EQ(!mask[r][0][q][k].item<bool>(), m.attends[q * s + k] != 0)
            << "row " << r << " query " << q << " key " << k << (per_document ? " (per document)" : " (per row)");
    }
  }
}

TEST(PromptBatches, PrefixLmPerRowEqualsTheForksMasks) {
  expect_prefix_lm_batch(false, true, false);
}
TEST(PromptBatches, PrefixLmPerDocumentEqualsTheForksMasks) {
  expect_prefix_lm_batch(true, true, true);
}
TEST(PromptBatches, PrefixLmWithLossOnEveryToken) {
  expect_prefix_lm_batch(true, false, false);
}

TEST(PromptBatches, PrefixLmSplitsDependOnTheSampleNotTheBatch) {
  const int s = 16;
  MemoryDataset ds(s);
  std::mt19937 g(3);
  for (int i = 0; i < 4; ++i) ds.add(random_tokens(g, s + 1, 0.0));
  BatchOptions o;
  o.objective = data::Objective::kPrefixLm;
  o.eod = kEod;
  o.seed = 5;
  const torch::Tensor both = make_micro_batch(ds, {1, 3}, o).documents.mask();  // [2, 1, s, s]
  const torch::Tensor alone = make_micro_batch(ds, {3}, o).documents.mask();    // [1, 1, s, s]
  EXPECT_TRUE(torch::equal(both[1], alone[0])) << "sample 3's prefix changed with its micro-batch";
  EXPECT_FALSE(torch::equal(both[0], both[1]));
}

// Rows of prompt pairs (some with empty targets, some inputs longer than the rest), padded.
MemoryDataset packed_rows(int s, std::vector<data::PackedRow>& rows) {
  MemoryDataset ds(s);
  std::mt19937 g(11);
  for (int i = 0; i < 5; ++i) {
    std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> docs;
    int64_t used = 0;
    while (true) {
      std::vector<int64_t> in = random_tokens(g, 1 + g() % 6, 0.0), tg = random_tokens(g, g() % 4, 0.0);
      if (!tg.empty()) tg.back() = kEod;
      if (used + static_cast<int64_t>(in.size() + tg.size()) > s + 1) break;
      used += static_cast<int64_t>(in.size() + tg.size());
      docs.emplace_back(in, tg);
    }
    rows.push_back(data::pack_mtf_row(docs, s + 1, kPad));
    ds.add(rows.back());
  }
  return ds;
}

TEST(PromptBatches, PackedNonCausalEqualsTheForksSample) {
  const int s = 20;
  std::vector<data::PackedRow> rows;
  const MemoryDataset ds = packed_rows(s, rows);
  BatchOptions o;
  o.objective = data::Objective::kPackedMtfNonCausal;
  o.eod = kEod;
  o.pad = kPad;
  const std::vector<int64_t> indices = {4, 1, 2};
  const model::MicroBatch mb = make_micro_batch(ds, indices, o);
  ASSERT_TRUE(mb.documents.has_prefix());
  const torch::Tensor mask = mb.documents.mask();
  for (size_t r = 0; r < indices.size(); ++r) {
    const data::PackedMtfSample f = data::packed_mtf_sample(rows[indices[r]], kPad);
    for (int64_t q = 0; q < s; ++q) {
      EXPECT_EQ(mb.labels[r][q].item<int64_t>(), f.labels[q]);
      EXPECT_FLOAT_EQ(mb.loss_mask[r][q].item<float>(), f.loss_mask[q]) << "row " << r << " position " << q;
      if (f.segment_ids[q] == 0) continue;  // padding queries: no loss, and no other token attends to them
      for (int64_t k = 0; k < s; ++k)
        ASSERT_EQ(!mask[r][0][q][k].item<bool>(), data::packed_mtf_attends(f, q, k, true))
            << "row " << r << " query " << q << " key " << k;
    }
    for (int64_t q = 1; q < s; ++q) {  // learned positions restart at each prompt
      const bool same = f.segment_ids[q] == f.segment_ids[q - 1];
      EXPECT_EQ(mb.position_ids[r][q].item<int64_t>(), same ? mb.position_ids[r][q - 1].item<int64_t>() + 1 : 0);
    }
  }
}

TEST(PromptBatches, PackedCausalMasksAndTargetLoss) {
  const int s = 20;
  std::vector<data::PackedRow> rows;
  const MemoryDataset ds = packed_rows(s, rows);
  for (const bool targets_only : {false, true}) {
    BatchOptions o;
    o.objective = data::Objective::kPackedMtf;
    o.eod = kEod;
    o.pad = kPad;
    o.loss_on_targets_only = targets_only;
    const std::vector<int64_t> indices = {0, 3};
    const model::MicroBatch mb = make_micro_batch(ds, indices, o);
    ASSERT_FALSE(mb.documents.has_prefix());
    const torch::Tensor mask = mb.documents.mask();
    for (size_t r = 0; r < indices.size(); ++r) {
      const data::PackedRow& row = rows[indices[r]];
      const data::PackedMtfSample f = data::packed_mtf_sample(row, kPad);
      for (int64_t q = 0; q < s; ++q) {
        // finetune_t0.py: no loss where the label is padding; with --loss-on-targets-only, none on input labels.
        const bool counts = row.tokens[q + 1] != kPad && (!targets_only || row.is_inputs[q + 1] == 0);
        EXPECT_EQ(mb.loss_mask[r][q].item<float>(), counts ? 1.0f : 0.0f) << "row " << r << " position " << q;
        if (f.segment_ids[q] == 0) continue;
        for (int64_t k = 0; k < s; ++k)
          ASSERT_EQ(!mask[r][0][q][k].item<bool>(), data::packed_mtf_attends(f, q, k, false))
              << "row " << r << " query " << q << " key " << k;
      }
    }
    o.norm_target_loss = true;
    const model::MicroBatch n = make_micro_batch(ds, indices, o);
    std::vector<float> flat(mb.loss_mask.data_ptr<float>(), mb.loss_mask.data_ptr<float>() + mb.loss_mask.numel());
    int64_t runs = 0;
    for (size_t i = 0; i < flat.size(); ++i) runs += flat[i] == 1.0f && (i == 0 || flat[i - 1] != 1.0f);
    EXPECT_NEAR(n.loss_mask.sum().item<float>(), static_cast<float>(runs), 1e-5) << "each run of targets weighs 1";
  }
}

TEST(PromptBatches, PackedObjectiveRefusesUnpackedSamples) {
  MemoryDataset ds(8);
  ds.add(std::vector<int64_t>(9, 1));
  BatchOptions o;
  o.objective = data::Objective::kPackedMtf;
  o.pad = kPad;
  EXPECT_THROW(make_micro_batch(ds, {0}, o), InternalError);
}

}  // namespace
}  // namespace megaton::train
