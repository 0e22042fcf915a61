// BigScience's "mode 2" data selection (--train/valid/test-weighted-split-paths, inventory §3.5): a group
// "NAME: W1 S1:E1 P1, W2 S2:E2 P2" blends datasets P1, P2 with weights W1, W2 (normalized), each restricted to the
// documents [round(S*n), round(E*n)) of its n documents (START:END fractions, Python rounding). The train flag takes
// exactly one group; valid and test take one or more, each evaluated and logged separately under its NAME.
// The *-path variants name a file holding the groups as double-quoted strings ("NAME: ...", one or several per line).
//
//   auto g = data::parse_weighted_split_group("valid-en: 1 0.95:1 /data/en", "--valid-weighted-split-paths");
//   g.name == "valid-en"; g.parts[0].start == 0.95
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace megaton::data {

struct WeightedSplitPart {
  double weight = 0;  // normalized over the group
  double start = 0, end = 1;
  std::string prefix;
};

struct WeightedSplitGroup {
  std::string name;
  std::vector<WeightedSplitPart> parts;
};

/// Parses one group; UsageError naming `flag`, the group and what was expected.
WeightedSplitGroup parse_weighted_split_group(const std::string& group, const std::string& flag);

/// The double-quoted groups of a --*-weighted-split-paths-path file (a file with no quotes: one group per non-empty
/// line). UsageError naming `flag` and the file when it cannot be read or holds no group.
std::vector<std::string> read_weighted_split_paths_file(const std::string& path, const std::string& flag);

/// Documents [round(start*n), round(end*n)) of n (Megatron's get_split_by_range_).
std::pair<int64_t, int64_t> split_by_range(double start, double end, int64_t n);

}  // namespace megaton::data
