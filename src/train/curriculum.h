// Sequence-length curriculum learning from a DeepSpeed config's `curriculum_learning` section (curriculum_type
// "seqlen"), as DeepSpeed's CurriculumScheduler schedules it and Megatron-DeepSpeed applies it: before iteration k
// the difficulty is update(k); the iteration's samples are cut to their first `difficulty` tokens (tokens, labels,
// loss mask and positions alike), the consumed tokens grow by samples x difficulty, the log line shows
// `curriculum seqlen`. Validation runs at the full --seq-length.
//   fixed_linear:   floor(step / total x (max - min) + min), rounded down to a multiple of difficulty_step, <= max
//   fixed_root:     the same with (step / total)^(1 / root_degree)
//   fixed_discrete: difficulty[i] for the first max_step[i] >= step; the last difficulty after the last max_step
// The difficulty only moves while it is below max_difficulty (DeepSpeed's update_difficulty).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace megaton::train {

struct CurriculumOptions {
  bool enabled = false;
  std::string schedule_type;  // fixed_linear | fixed_root | fixed_discrete
  int64_t min_difficulty = 0, max_difficulty = 0;
  int64_t total_curriculum_step = 0, difficulty_step = 1;  // fixed_linear, fixed_root
  double root_degree = 1;                                  // fixed_root
  std::vector<int64_t> difficulty, max_step;               // fixed_discrete: |difficulty| = |max_step| + 1

  /// UsageError naming the key unless the schedule is complete and every difficulty is in 1..seq_length.
  void validate(int seq_length) const;
};

class CurriculumScheduler {
 public:
  explicit CurriculumScheduler(const CurriculumOptions& o) : o_(o), current_(o.min_difficulty) {}
  /// The schedule's difficulty at `step` (DeepSpeed's get_difficulty).
  int64_t difficulty_at(int64_t step) const;
  /// DeepSpeed's update_difficulty(step): moves the difficulty while it is below the maximum; returns it.
  int64_t update(int64_t step);
  int64_t current() const { return current_; }

 private:
  CurriculumOptions o_;
  int64_t current_;
};

}  // namespace megaton::train
