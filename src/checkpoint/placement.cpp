#include "checkpoint/placement.h"

#include <algorithm>

#include "core/error.h"

namespace megaton::checkpoint {

int64_t Box::numel() const {
  int64_t n = 1;
  for (int64_t c : count) n *= c;
  return n;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

ShardPlacement place_shard(const std::string& name, const std::vector<int64_t>& global_shape, int partition_dim,
                           int64_t unpadded_rows, int tp_rank, int tp_size) {
  const int nd = static_cast<int>(global_shape.size());
  MEGATON_ASSERT(partition_dim >= -1 && partition_dim < nd, "tensor '", name, "': partition_dim ", partition_dim,
                 " out of range for global shape ", shape_str(global_shape));
  ShardPlacement p;
  p.local_shape = global_shape;
  // The shard's part of the (padded) global tensor: [begin, begin + local) along partition_dim.
  int64_t begin = 0;
  if (partition_dim >= 0) {
    const int64_t g = global_shape[partition_dim];
    MEGATON_ASSERT(g % tp_size == 0, "tensor '", name, "': dimension ", partition_dim, " of ", shape_str(global_shape),
                   " does not split evenly over TP=", tp_size);
    p.local_shape[partition_dim] = g / tp_size;
    begin = tp_rank * (g / tp_size);
  }
  const bool padded = unpadded_rows > 0 && nd > 0 && unpadded_rows < global_shape[0];
  MEGATON_ASSERT(unpadded_rows <= 0 || nd == 0 || unpadded_rows <= global_shape[0], "tensor '", name,
                 "': global_unpadded_rows ", unpadded_rows, " > rows of ", shape_str(global_shape));
  if (!padded) {
    p.main.dataset_shape = global_shape;
    p.main.box.offset.assign(nd, 0);
    p.main.box.count = p.local_shape;
    if (partition_dim >= 0) p.main.box.offset[partition_dim] = begin;
    return p;
  }
  MEGATON_ASSERT(partition_dim <= 0, "tensor '", name, "': vocabulary padding needs partition_dim 0 or -1, got ",
                 partition_dim);
  const int64_t rows_begin = begin, rows_end = begin + p.local_shape[0];
  const int64_t U = unpadded_rows, P = global_shape[0];
  p.has_padding = true;
  p.main.dataset_shape = global_shape;
  p.main.dataset_shape[0] = U;
  p.padding.dataset_shape = global_shape;
  p.padding.dataset_shape[0] = P - U;
  for (RowSlab* s : {&p.main, &p.padding}) {
    s->box.offset.assign(nd, 0);
    s->box.count = p.local_shape;
  }
  // Main: global rows [rows_begin, min(rows_end, U)).
  const int64_t m_end = std::min(rows_end, U);
  p.main.box.offset[0] = std::min(rows_begin, U);
  p.main.box.count[0] = std::max<int64_t>(0, m_end - rows_begin);
  p.main.local_row_begin = 0;
  // Padding: global rows [max(rows_begin, U), rows_end) -> padding rows minus U.
  const int64_t q_begin = std::max(rows_begin, U);
  p.padding.box.offset[0] = std::min(q_begin, P) - U;
  p.padding.box.count[0] = std::max<int64_t>(0, rows_end - q_begin);
  p.padding.local_row_begin = q_begin - rows_begin;
  return p;
}

}  // namespace megaton::checkpoint
