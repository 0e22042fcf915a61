// Batch-size ramp-up and sample-based iteration counts against hand-computed values (reference inventory §7.2).
#include "optim/microbatches.h"

#include <gtest/gtest.h>

#include "core/error.h"

using namespace megaton;
using optim::NumMicroBatchesCalculator;

TEST(OptimMicroBatches, ConstantDividesGlobalBatch) {
  NumMicroBatchesCalculator c(64, 2, 4);
  EXPECT_EQ(c.num_micro_batches(), 8);
  c.update(123456, true);
  EXPECT_EQ(c.num_micro_batches(), 8);
  EXPECT_THROW(NumMicroBatchesCalculator(60, 4, 4), UsageError);
}

TEST(OptimMicroBatches, RampupFollowsIntOfConsumedOverSamplesPerIncrement) {
  // START 4, INCR 4, SAMPLES 100, GBS 16, MBS 2, DP 2: 3 increments of 33.33 samples each.
  NumMicroBatchesCalculator c(4, 4, 100, 16, 2, 2);
  const std::vector<std::pair<int64_t, int64_t>> expect = {{0, 4},   {33, 4},   {34, 8},   {66, 8},    {67, 12},
                                                           {99, 12}, {100, 16}, {101, 16}, {10000, 16}};
  for (auto [consumed, gbs] : expect) {
    c.update(consumed, true);
    EXPECT_EQ(c.current_global_batch_size(), gbs) << "consumed " << consumed;
    EXPECT_EQ(c.num_micro_batches(), gbs / 4) << "consumed " << consumed;
  }
}

TEST(OptimMicroBatches, ConsistencyCheckNamesTheBatch) {
  // START 6 with MBS*DP = 4: 6 is not a whole number of micro-batches.
  NumMicroBatchesCalculator c(6, 2, 100, 16, 2, 2);
  EXPECT_NO_THROW(c.update(0, false));
  EXPECT_THROW(c.update(0, true), UsageError);
}

TEST(OptimMicroBatches, RejectsDegenerateRamps) {
  EXPECT_THROW(NumMicroBatchesCalculator(16, 4, 100, 16, 2, 2), UsageError);  // nothing to ramp
  EXPECT_THROW(NumMicroBatchesCalculator(4, 5, 100, 16, 2, 2), UsageError);   // 12 % 5 != 0
  EXPECT_THROW(NumMicroBatchesCalculator(32, 4, 100, 16, 2, 2), UsageError);  // START > GBS
  EXPECT_THROW(NumMicroBatchesCalculator(4, 4, 0, 16, 2, 2), UsageError);     // SAMPLES 0
}

TEST(OptimMicroBatches, TrainItersForSamples) {
  NumMicroBatchesCalculator constant(16, 2, 2);
  EXPECT_EQ(optim::train_iters_for_samples(1000, constant), 62);  // 1000 // 16, partial batch dropped
  // Ramp: 9 iterations of 4 (to 36), 4 of 8 (to 68), 3 of 12 (to 104) = 16 iterations; then (1000-104)//16 = 56.
  NumMicroBatchesCalculator ramp(4, 4, 100, 16, 2, 2);
  EXPECT_EQ(optim::train_iters_for_samples(1000, ramp), 72);
  EXPECT_EQ(ramp.current_global_batch_size(), 4);  // reset to consumed = 0
  // Fewer samples than the ramp consumes: Megatron's floor division goes negative: 16 + floor(-54/16) = 12.
  EXPECT_EQ(optim::train_iters_for_samples(50, ramp), 12);
}

TEST(OptimMicroBatches, FromCommandLine) {
  auto c = optim::make_num_micro_batches_calculator(/*global=*/16, /*micro=*/2, {}, /*dp=*/2);
  EXPECT_FALSE(c.rampup());
  EXPECT_EQ(c.num_micro_batches(), 4);
  c = optim::make_num_micro_batches_calculator(16, 2, {4, 4, 100}, 2);
  EXPECT_TRUE(c.rampup());
  EXPECT_EQ(c.num_micro_batches(), 1);
}
