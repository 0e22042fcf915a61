// Pieces of the training loop that need no model: micro-batches from samples (labels shifted by one, EOD masking),
// --skip-train-iteration-range parsing, and the signal flag.
#include <gtest/gtest.h>

#include <csignal>

#include "core/error.h"
#include "train/batches.h"
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

}  // namespace

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

TEST(TrainPieces, SignalsAreRecordedNotFatal) {
  train::StopSignals s;
  EXPECT_EQ(s.received(), 0);
  std::raise(SIGUSR1);
  EXPECT_EQ(s.received(), SIGUSR1);
  s.clear();
  std::raise(SIGTERM);
  EXPECT_EQ(s.received(), SIGTERM);
}
