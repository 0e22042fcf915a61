// Pieces of the training loop that need no model: micro-batches from samples (labels shifted by one, EOD masking,
// the document-wise positions and attention masks), --skip-train-iteration-range parsing, and the signal flag.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <deque>

#include "core/error.h"
#include "train/batches.h"
#include "train/skip_ranges.h"
#include "train/stop_signals.h"

using namespace megaton;

namespace {

// Sample i = tokens 10*i, 10*i+1, ..., with token 3 standing for end-of-document wherever i*10+k == 3 mod 7.
class CountingDataset : public data::SampleDataset {
 public:
  int64_t size() const override { return 100; }
  int seq_length() const override { return 6; }
  void get(int64_t i, int64_t* out) const override {
    for (int k = 0; k <= 6; ++k) out[k] = (10 * i + k) % 7 == 3 ? 3 : 10 * i + k;
  }
};

// Fixed samples of seq_length 7 (8 tokens each).
class ListDataset : public data::SampleDataset {
 public:
  explicit ListDataset(std::vector<std::vector<int64_t>> samples) : samples_(std::move(samples)) {}
  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  int seq_length() const override { return 7; }
  void get(int64_t i, int64_t* out) const override {
    std::copy(samples_[static_cast<size_t>(i)].begin(), samples_[static_cast<size_t>(i)].end(), out);
  }

 private:
  std::vector<std::vector<int64_t>> samples_;
};

// Megatron's get_ltor_masks_and_position_ids (megatron/utils.py) with both reset flags, transcribed loop for loop:
// a lower-triangular mask of ones, then for each EOD at i among the tokens, mask[b, 0, i+1:, :i+1] = 0 and
// position_ids[b, i+1:] -= i + 1 - prev_index; returned as mask < 0.5 (true = masked).
std::pair<torch::Tensor, torch::Tensor> megatron_masks(const torch::Tensor& tokens, int64_t eod) {
  const int64_t b = tokens.size(0), s = tokens.size(1);
  torch::Tensor mask = torch::tril(torch::ones({b, s, s})).view({b, 1, s, s});
  torch::Tensor pos = torch::arange(s, torch::kInt64).unsqueeze(0).repeat({b, 1});
  for (int64_t r = 0; r < b; ++r) {
    int64_t prev = 0;
    for (int64_t i = 0; i < s; ++i) {
      if (tokens[r][i].item<int64_t>() != eod) continue;
      mask[r][0].narrow(0, i + 1, s - i - 1).narrow(1, 0, i + 1).zero_();
      pos[r].narrow(0, i + 1, s - i - 1).sub_(i + 1 - prev);
      prev = i + 1;
    }
  }
  return {mask < 0.5, pos};
}

}  // namespace

TEST(TrainPieces, ResetFlagsGiveMegatronsPositionsAndMask) {
  // eod = 0: two boundaries in the first sample (one right at the start), one in the second, and an EOD as the last
  // label (not a token) in the third.
  ListDataset ds({{5, 0, 0, 7, 8, 0, 9, 4}, {1, 2, 3, 4, 0, 6, 7, 8}, {1, 2, 3, 4, 5, 6, 7, 0}});
  train::BatchOptions o;
  o.eod = 0;
  o.reset_position_ids = o.reset_attention_mask = true;
  const model::MicroBatch mb = train::make_micro_batch(ds, {0, 1, 2}, o);
  const auto [mask, pos] = megatron_masks(mb.tokens, 0);
  ASSERT_TRUE(mb.position_ids.defined() && mb.documents.defined());
  const torch::Tensor ours = mb.documents.per_forward().mask();
  EXPECT_EQ(ours.sizes(), (std::vector<int64_t>{3, 1, 7, 7}));
  EXPECT_EQ(ours.scalar_type(), torch::kBool);
  EXPECT_TRUE(torch::equal(ours, mask)) << ours << mask;
  EXPECT_TRUE(torch::equal(mb.position_ids, pos)) << mb.position_ids << pos;
  EXPECT_EQ(mb.position_ids[0][6].item<int64_t>(), 0);  // after the EOD at 5
  EXPECT_GT(mask.logical_xor(torch::ones({7, 7}, torch::kBool).triu(1)).sum().item<int64_t>(), 0);  // not causal
  // The same documents as cumulative lengths over the three samples end to end (the variable-length kernel's input):
  // sample 0 is [5 0] [0] [7 8 0] [9], sample 1 [1 2 3 4 0] [6 7], sample 2 one document.
  EXPECT_TRUE(torch::equal(mb.documents.cu_seqlens(), torch::tensor({0, 2, 3, 6, 7, 12, 14, 21}, torch::kInt32)))
      << mb.documents.cu_seqlens();
  EXPECT_EQ(mb.documents.max_length(), 7);

  // Each flag alone.
  o.reset_attention_mask = false;
  const model::MicroBatch positions_only = train::make_micro_batch(ds, {0, 1, 2}, o);
  EXPECT_TRUE(torch::equal(positions_only.position_ids, pos));
  EXPECT_FALSE(positions_only.documents.defined());
  o.reset_attention_mask = true;
  o.reset_position_ids = false;
  const model::MicroBatch mask_only = train::make_micro_batch(ds, {0, 1, 2}, o);
  EXPECT_FALSE(mask_only.position_ids.defined());
  EXPECT_TRUE(torch::equal(mask_only.documents.per_forward().mask(), mask));

  // No EOD before a sample's last token: the mask would be the causal one, so none is built; the positions are 0..s-1.
  o.reset_position_ids = true;
  ListDataset plain({{1, 2, 3, 4, 5, 6, 0, 8}, {1, 2, 3, 4, 5, 6, 7, 0}});
  const model::MicroBatch causal = train::make_micro_batch(plain, {0, 1}, o);
  EXPECT_FALSE(causal.documents.defined());
  EXPECT_TRUE(torch::equal(causal.position_ids, torch::arange(7, torch::kInt64).unsqueeze(0).repeat({2, 1})));
  EXPECT_TRUE(torch::equal(megatron_masks(causal.tokens, 0).first[0][0], torch::ones({7, 7}, torch::kBool).triu(1)));

  // The flags need the EOD id.
  o.eod = -1;
  EXPECT_THROW(train::make_micro_batch(ds, {0}, o), UsageError);
}

TEST(TrainPieces, MicroBatchShiftsLabelsAndMasksEod) {
  CountingDataset ds;
  train::BatchOptions o;
  o.eod_mask_loss = true;
  o.eod = 3;
  auto mb = train::make_micro_batch(ds, {4, 9}, o);
  ASSERT_EQ(mb.tokens.sizes(), (std::vector<int64_t>{2, 6}));
  ASSERT_EQ(mb.labels.sizes(), (std::vector<int64_t>{2, 6}));
  for (int r = 0; r < 2; ++r) {
    std::vector<int64_t> s(7);
    ds.get(r == 0 ? 4 : 9, s.data());
    for (int k = 0; k < 6; ++k) {
      EXPECT_EQ(mb.tokens[r][k].item<int64_t>(), s[k]);
      EXPECT_EQ(mb.labels[r][k].item<int64_t>(), s[k + 1]);
      EXPECT_EQ(mb.loss_mask[r][k].item<float>(), s[k] == 3 ? 0.0f : 1.0f) << r << " " << k;
    }
  }
  EXPECT_LT(mb.loss_mask.sum().item<float>(), 12.0f);  // some EOD was masked
  o.eod_mask_loss = false;
  EXPECT_EQ(train::make_micro_batch(ds, {4, 9}, o).loss_mask.sum().item<float>(), 12.0f);
}

TEST(TrainPieces, SkipRanges) {
  auto r = train::parse_skip_ranges({"3-4", "10-10"});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0], (std::pair<int64_t, int64_t>{3, 4}));
  EXPECT_EQ(r[1], (std::pair<int64_t, int64_t>{10, 10}));
  for (const char* bad : {"5", "4-3", "a-b", "0-2", "1-2x", "-3"}) {
    try {
      train::parse_skip_ranges({bad});
      ADD_FAILURE() << bad << " accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(TrainPieces, SkipRangesAsTheForksLoopTakesThem) {
  using Ranges = std::deque<std::pair<int64_t, int64_t>>;
  // Sorted and merged: 1-5 2-6 -> 1-6; 20-25 and 30-30 stay apart.
  train::SkipRanges s({"30-30", "2-6", "20-25", "1-5"});
  EXPECT_EQ(s.ranges(), (Ranges{{1, 6}, {20, 25}, {30, 30}}));
  // A run starting at iteration 8 drops 1-6; nothing blocks.
  EXPECT_EQ(s.start_at(8), (std::pair<int64_t, int64_t>{0, 0}));
  EXPECT_EQ(s.ranges(), (Ranges{{20, 25}, {30, 30}}));
  EXPECT_EQ(s.take(8).second, 0);   // iteration 9 is outside 20-25
  EXPECT_EQ(s.take(18).second, 0);  // iteration 19 too
  // Before iteration 20 (iteration 19 done): 25 - 19 = 6 micro-batch groups skipped, the range taken off.
  const auto t = s.take(19);
  EXPECT_EQ(t.first, (std::pair<int64_t, int64_t>{20, 25}));
  EXPECT_EQ(t.second, 6);
  EXPECT_EQ(s.take(19).second, 0);
  // 30-30 before iteration 30: one micro-batch group.
  EXPECT_EQ(s.take(29).second, 1);
  EXPECT_TRUE(s.ranges().empty());
  // A range ending exactly where a run starts is kept first and never taken: it holds back the later ones.
  train::SkipRanges stuck({"5-10", "20-25"});
  EXPECT_EQ(stuck.start_at(10), (std::pair<int64_t, int64_t>{5, 10}));
  EXPECT_EQ(stuck.take(19).second, 0);
}

TEST(TrainPieces, SignalsAreRecordedNotFatal) {
  train::StopSignals s;
  EXPECT_EQ(s.received(), 0);
  std::raise(SIGUSR1);
  EXPECT_EQ(s.received(), SIGUSR1);
  s.clear();
  std::raise(SIGTERM);
  EXPECT_EQ(s.received(), SIGTERM);
}
