// The job-wide list of tensors in a checkpoint, built collectively from every rank's local shards: which datasets
// exist (same on every rank, in the same order, as parallel HDF5 needs for collective creation), their global
// shapes, and which ranks write (or verify) each hyperslab: data-parallel rank 0 only, tensor-parallel rank 0 only
// for TP-replicated tensors, and the lowest pipeline stage holding it for tensors held by several (tied embedding).
#pragma once
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "checkpoint/placement.h"
#include "dist/grid.h"

namespace megaton::checkpoint {

/// One local shard to save or load.
struct LocalTensor {
  std::string path;  // "model/<name>", "optim/<state>/<name>"
  torch::Tensor tensor;
  std::vector<int64_t> global_shape;  // ParamInfo::global_shape (padded rows included)
  int partition_dim = -1;
  int64_t unpadded_rows = 0;
};

struct CatalogEntry {
  std::string path;
  std::vector<int64_t> global_shape;
  int partition_dim = -1;
  int64_t unpadded_rows = 0;
  std::string dtype;  // dtype name of the shards (of the first holder)
  int writer_pp = 0;  // the pipeline stage whose dp-0 ranks write/verify it
};

using Catalog = std::map<std::string, CatalogEntry>;

/// Collective over the world. Only data-parallel rank 0 contributes (replicas hold the same tensors). Every rank
/// checks the merged result identically and throws InternalError for an inconsistent contract (same path with
/// different shapes, a TP shard that nobody holds).
Catalog gather_catalog(const std::vector<LocalTensor>& local, const dist::RankGrid& grid, const dist::Coords& me);

/// The bytes of the whole tensor `e` describes (its global shape, padded rows included, in its dtype).
int64_t catalog_entry_bytes(const CatalogEntry& e);

/// True when the rank at `c` is the one that writes (and checksums) its shard of `e`.
bool is_designated(const CatalogEntry& e, const dist::Coords& c);

/// The shard placement of a catalog entry at TP rank `tp_rank` of `tp_size`.
ShardPlacement place(const CatalogEntry& e, int tp_rank, int tp_size);

}  // namespace megaton::checkpoint
