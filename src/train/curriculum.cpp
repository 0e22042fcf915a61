#include "train/curriculum.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace megaton::train {

void CurriculumOptions::validate(int seq_length) const {
  if (!enabled) return;
  const char* where = "the DeepSpeed config's curriculum_learning";
  MEGATON_CHECK(min_difficulty >= 1 && min_difficulty <= max_difficulty && max_difficulty <= seq_length, UsageError,
                where, ": expected 1 <= min_difficulty (", min_difficulty, ") <= max_difficulty (", max_difficulty,
                ") <= --seq-length (", seq_length, ")");
  if (schedule_type == "fixed_linear" || schedule_type == "fixed_root") {
    MEGATON_CHECK(total_curriculum_step > 0 && difficulty_step > 0, UsageError, where,
                  ".schedule_config: total_curriculum_step and difficulty_step must be > 0 (got ",
                  total_curriculum_step, ", ", difficulty_step, ")");
    MEGATON_CHECK(min_difficulty >= difficulty_step, UsageError, where, ": min_difficulty (", min_difficulty,
                  ") below difficulty_step (", difficulty_step, ") rounds the first lengths down to 0");
    MEGATON_CHECK(schedule_type == "fixed_linear" || root_degree > 0, UsageError, where,
                  ".schedule_config.root_degree must be > 0, got ", root_degree);
  } else if (schedule_type == "fixed_discrete") {
    MEGATON_CHECK(!max_step.empty() && difficulty.size() == max_step.size() + 1, UsageError, where,
                  ".schedule_config: fixed_discrete needs one more difficulty than max_step (got ", difficulty.size(),
                  " and ", max_step.size(), ")");
    for (int64_t d : difficulty)
      MEGATON_CHECK(d >= 1 && d <= seq_length, UsageError, where, ".schedule_config.difficulty ", d,
                    " is outside 1..--seq-length (", seq_length, ")");
  } else {
    throw UsageError(
        str(where, ".schedule_type '", schedule_type, "': expected fixed_linear, fixed_root or fixed_discrete"));
  }
}

int64_t CurriculumScheduler::difficulty_at(int64_t step) const {
  if (o_.schedule_type == "fixed_discrete") {
    if (step > o_.max_step.back()) return o_.difficulty.back();
    for (size_t i = 0; i < o_.max_step.size(); ++i)
      if (step <= o_.max_step[i]) return o_.difficulty[i];
    return o_.difficulty.back();
  }
  const double degree = o_.schedule_type == "fixed_root" ? o_.root_degree : 1.0;
  const double x = std::pow(double(step) / double(o_.total_curriculum_step), 1.0 / degree);
  auto next =
      static_cast<int64_t>(std::floor(x * double(o_.max_difficulty - o_.min_difficulty) + double(o_.min_difficulty)));
  next -= next % o_.difficulty_step;
  return std::min(next, o_.max_difficulty);
}

int64_t CurriculumScheduler::update(int64_t step) {
  if (current_ < o_.max_difficulty) current_ = difficulty_at(step);
  return current_;
}

}  // namespace megaton::train
