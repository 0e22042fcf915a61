// DeepSpeed's CurriculumScheduler, step by step: the values below are DeepSpeed's formulas worked by hand.
#include "train/curriculum.h"

#include <gtest/gtest.h>

#include "core/error.h"

using megaton::train::CurriculumOptions;
using megaton::train::CurriculumScheduler;

namespace {
CurriculumOptions root(const char* type, int64_t total, int64_t step, double degree = 1) {
  CurriculumOptions o;
  o.enabled = true;
  o.schedule_type = type;
  o.min_difficulty = 8;
  o.max_difficulty = 64;
  o.total_curriculum_step = total;
  o.difficulty_step = step;
  o.root_degree = degree;
  return o;
}
}  // namespace

TEST(TrainCurriculum, FixedLinearRoundsDownToTheStep) {
  CurriculumScheduler s(root("fixed_linear", 100, 8));
  // floor(k/100 x 56 + 8) rounded down to a multiple of 8, at most 64.
  EXPECT_EQ(s.difficulty_at(1), 8);     // 8.56 -> 8
  EXPECT_EQ(s.difficulty_at(15), 16);   // 16.4 -> 16
  EXPECT_EQ(s.difficulty_at(50), 32);   // 36 -> 32
  EXPECT_EQ(s.difficulty_at(100), 64);  // 64
  EXPECT_EQ(s.difficulty_at(500), 64);  // capped
}

TEST(TrainCurriculum, FixedRootGrowsFasterEarly) {
  CurriculumScheduler s(root("fixed_root", 100, 8, 2));
  EXPECT_EQ(s.difficulty_at(1), 8);    // sqrt(0.01) = 0.1: 13.6 -> 13 -> 8
  EXPECT_EQ(s.difficulty_at(25), 32);  // sqrt(0.25) = 0.5: 36 -> 32
  EXPECT_EQ(s.difficulty_at(64), 48);  // 0.8: 52.8 -> 52 -> 48
}

TEST(TrainCurriculum, FixedDiscreteAndTheStickyMaximum) {
  CurriculumOptions o;
  o.enabled = true;
  o.schedule_type = "fixed_discrete";
  o.min_difficulty = 8;
  o.max_difficulty = 32;
  o.difficulty = {8, 32, 16};
  o.max_step = {5, 10};
  CurriculumScheduler s(o);
  EXPECT_EQ(s.update(1), 8);
  EXPECT_EQ(s.update(5), 8);
  EXPECT_EQ(s.update(6), 32);
  // Once at max_difficulty the difficulty stays, though the list goes back to 16 (DeepSpeed's update_difficulty).
  EXPECT_EQ(s.difficulty_at(11), 16);
  EXPECT_EQ(s.update(11), 32);
}

TEST(TrainCurriculum, IncompleteSchedulesAreRefused) {
  CurriculumOptions o = root("fixed_linear", 100, 8);
  EXPECT_NO_THROW(o.validate(64));
  EXPECT_THROW(o.validate(32), megaton::UsageError);  // max_difficulty above --seq-length
  o.schedule_type = "fixed_cubic";
  EXPECT_THROW(o.validate(64), megaton::UsageError);
  CurriculumOptions small = root("fixed_linear", 100, 16);
  EXPECT_THROW(small.validate(64), megaton::UsageError);  // min 8 rounds down to 0 with steps of 16
}
