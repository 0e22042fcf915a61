#include "train/skip_ranges.h"

#include <algorithm>

#include "core/error.h"

namespace megaton::train {

std::vector<std::pair<int64_t, int64_t>> parse_skip_ranges(const std::vector<std::string>& ranges) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& r : ranges) {
    const auto dash = r.find('-');
    size_t end_a = 0, end_b = 0;
    int64_t a = -1, b = -1;
    try {
      if (dash != std::string::npos) {
        a = std::stoll(r.substr(0, dash), &end_a);
        b = std::stoll(r.substr(dash + 1), &end_b);
      }
    } catch (const std::exception&) {
      a = b = -1;
    }
    MEGATON_CHECK(dash != std::string::npos && end_a == dash && end_b == r.size() - dash - 1 && a >= 1 && a <= b,
                  UsageError, "--skip-train-iteration-range: expected START-END with 1 <= START <= END, got '", r, "'");
    out.emplace_back(a, b);
  }
  return out;
}

SkipRanges::SkipRanges(const std::vector<std::string>& flags) {
  auto sorted = parse_skip_ranges(flags);
  std::sort(sorted.begin(), sorted.end());
  for (const auto& [a, b] : sorted) {
    if (!ranges_.empty() && ranges_.back().second >= a)
      ranges_.back().second = std::max(ranges_.back().second, b);
    else
      ranges_.emplace_back(a, b);
  }
}

std::pair<int64_t, int64_t> SkipRanges::start_at(int64_t iteration) {
  while (!ranges_.empty() && ranges_.front().second < iteration) ranges_.pop_front();  // bisect_left on the ends
  if (!ranges_.empty() && ranges_.front().second == iteration) return ranges_.front();
  return {0, 0};
}

std::pair<std::pair<int64_t, int64_t>, int64_t> SkipRanges::take(int64_t iteration) {
  if (ranges_.empty()) return {{0, 0}, 0};
  const auto r = ranges_.front();
  if (!(r.first <= iteration + 1 && iteration + 1 <= r.second)) return {{0, 0}, 0};
  ranges_.pop_front();
  return {r, r.second - iteration};
}

}  // namespace megaton::train
