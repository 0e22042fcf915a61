// Where a rank's local shard lives in the stored (global) datasets: the hyperslab it writes or reads, pure
// arithmetic over ParamInfo's contract (global shape, partition_dim over TP, vocabulary padding rows).
//
// Vocabulary padding: a padded tensor (global_unpadded_rows > 0, split on dim 0 or replicated) has global_shape[0]
// = padded rows P, of which the first U = global_unpadded_rows are real. The main dataset stores rows [0, U); the
// padding rows [U, P) go to a separate "<path>.vocab_padding" dataset [P-U, ...], restored only when a loading model
// pads to the same P (otherwise they are zero-filled; they hold no token).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace megaton::checkpoint {

/// A hyperslab: offset and count per dimension (both empty for a 0-d tensor).
struct Box {
  std::vector<int64_t> offset;
  std::vector<int64_t> count;
  int64_t numel() const;
  bool empty() const { return numel() == 0; }
};

/// One contiguous part of a local shard's rows (dim 0) mapped to a dataset.
struct RowSlab {
  std::vector<int64_t> dataset_shape;  // shape of the whole dataset
  Box box;                             // the part of the dataset this shard covers
  int64_t local_row_begin = 0;         // first row (dim 0) of the local shard that maps to box (0 for 0-d tensors)
};

struct ShardPlacement {
  RowSlab main;                      // "<path>"
  bool has_padding = false;          // true iff the tensor is padded (P > U), even if this shard holds no padding row
  RowSlab padding;                   // "<path>.vocab_padding"
  std::vector<int64_t> local_shape;  // the shape the local shard must have
};

/// Placement of TP rank `tp_rank` of `tp_size`. Throws InternalError (naming `name`) when the contract is broken:
/// partition_dim out of range or not dividing evenly, padding on a dimension other than 0, U > P.
ShardPlacement place_shard(const std::string& name, const std::vector<int64_t>& global_shape, int partition_dim,
                           int64_t unpadded_rows, int tp_rank, int tp_size);

/// "[4, 8]".
std::string shape_str(const std::vector<int64_t>& shape);

}  // namespace megaton::checkpoint
