// --skip-train-iteration-range as Megatron-DeepSpeed's training loop applies it (training.py): the ranges are sorted
// and overlapping ones merged; ranges that end before the run's first iteration are dropped (bisect on the ends);
// when the next iteration falls in the first remaining range, that range is taken off and the data iterator advances
// by (range end - current iteration) micro-batch groups (micro-batch x DP samples each) while the iteration counter,
// the consumed samples and the learning rate stay where they are. The iteration then runs on the data after them.
// The skipped samples are not counted in the consumed samples, so a checkpoint does not remember them: a resumed run
// reads from the consumed samples again, as the fork's does.
#pragma once
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

namespace megaton::train {

/// Parses --skip-train-iteration-range values "A-B" (inclusive, A <= B) into pairs; UsageError naming the value.
std::vector<std::pair<int64_t, int64_t>> parse_skip_ranges(const std::vector<std::string>& ranges);

class SkipRanges {
 public:
  /// Sorted, overlapping ranges merged (1-5 2-6 -> 1-6), as the fork's argument parsing leaves them.
  explicit SkipRanges(const std::vector<std::string>& flags);

  /// At the start of a run at `iteration`: drops the ranges whose end is before it. Returns the range left first when
  /// its end equals `iteration` (the fork then never takes it off, and it holds back every later range), else {0, 0}.
  std::pair<int64_t, int64_t> start_at(int64_t iteration);

  /// Before the iteration after `iteration`: when it falls in the first range, takes the range off and returns it
  /// with the micro-batch groups to skip (end - iteration); otherwise {{0, 0}, 0}.
  std::pair<std::pair<int64_t, int64_t>, int64_t> take(int64_t iteration);

  const std::deque<std::pair<int64_t, int64_t>>& ranges() const { return ranges_; }

 private:
  std::deque<std::pair<int64_t, int64_t>> ranges_;
};

}  // namespace megaton::train
