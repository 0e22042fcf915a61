// Layout-independent initialisation: a parameter's values depend only on (seed, canonical name, global index), never
// on how it is split over tensor/pipeline ranks. Each innermost row of the GLOBAL tensor (a vector along its last
// dimension) is drawn from its own CPU generator seeded by hash(seed, name, row); a rank draws only the rows its
// shard needs (all of them when the split is along the last dimension) and keeps its slice. So a TP=k model holds
// exactly the shards of the TP=1 model built with the same seed, and memory never exceeds the shard plus one row.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace megaton::parallel {

struct InitSpec {
  enum class Kind { kZeros, kOnes, kNormal, kUniform };
  Kind kind = Kind::kZeros;
  double scale = 0.0;  // std of kNormal; half-width a of kUniform(-a, a)
  /// Rows of dimension 0 at and beyond this index are zero (vocabulary padding); <= 0: no padding.
  int64_t valid_rows = 0;

  static InitSpec zeros() { return {Kind::kZeros, 0.0, 0}; }
  static InitSpec ones() { return {Kind::kOnes, 0.0, 0}; }
  static InitSpec normal(double std) { return {Kind::kNormal, std, 0}; }
  /// Xavier/Glorot uniform on the global (unpartitioned) fan-in/fan-out.
  static InitSpec xavier_uniform(int64_t fan_in, int64_t fan_out);
};

/// 64-bit seed of one row: a fixed mix (FNV-1a over the name, then splitmix64) so it is the same on every platform.
uint64_t row_seed(uint64_t seed, const std::string& name, int64_t row);

/// This rank's shard [..., global[partition_dim] / parts, ...] of the global tensor named `name`, in fp32 on the CPU.
/// partition_dim < 0: the whole tensor.
torch::Tensor init_shard(const std::string& name, const std::vector<int64_t>& global_shape, int partition_dim, int part,
                         int parts, const InitSpec& spec, uint64_t seed);

}  // namespace megaton::parallel
