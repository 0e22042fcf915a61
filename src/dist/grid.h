// The rank grid: pure arithmetic between a global rank and its (tp, dp, pp) coordinates, in Megatron's order
// (tensor-parallel rank fastest, then data-parallel, then pipeline), and the member lists of every group.
//
// Example, world 16, TP=2, PP=4, DP=2 (Megatron's docstring):
//   tp groups: [0,1] [2,3] ... [14,15]      dp groups: [0,2] [1,3] [4,6] ... [13,15]
//   pp groups: [0,4,8,12] [1,5,9,13] [2,6,10,14] [3,7,11,15]
#pragma once
#include <string>
#include <vector>

namespace megaton::dist {

struct Coords {
  int tp = 0;
  int dp = 0;
  int pp = 0;
};

class RankGrid {
 public:
  /// Throws UsageError unless tp*pp divides world and every size is >= 1.
  RankGrid(int world, int tp, int pp);

  int world() const { return world_; }
  int tp_size() const { return tp_; }
  int pp_size() const { return pp_; }
  int dp_size() const { return dp_; }

  Coords coords(int rank) const;
  int rank(const Coords& c) const;

  /// Members (global ranks, ascending by the group's own rank) of the group that `rank` belongs to.
  std::vector<int> tp_group(int rank) const;
  std::vector<int> dp_group(int rank) const;
  std::vector<int> pp_group(int rank) const;
  /// Model-parallel group: all tp*pp ranks holding one replica of the model.
  std::vector<int> mp_group(int rank) const;
  /// Embedding group: first and last pipeline stage of this rank's pipeline (one rank if PP=1).
  std::vector<int> embedding_group(int rank) const;

  /// "TP=2 x PP=4 x DP=2 (world 16)".
  std::string describe() const;

 private:
  int world_, tp_, pp_, dp_;
};

}  // namespace megaton::dist
