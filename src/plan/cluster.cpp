#include "plan/cluster.h"

#include "core/error.h"

namespace megaton::plan {

void validate_cluster(const Cluster& c) {
  MEGATON_CHECK(c.nodes >= 1, UsageError, "--nodes must be >= 1 (got ", c.nodes, ")");
  MEGATON_CHECK(c.gpus_per_node >= 1, UsageError, "--gpus-per-node must be >= 1 (got ", c.gpus_per_node, ")");
  MEGATON_CHECK(c.gpu_memory_gib > 0, UsageError, "--gpu-memory-gib must be > 0 (got ", c.gpu_memory_gib, ")");
  MEGATON_CHECK(c.memory_reserve_gib >= 0 && c.memory_reserve_gib < c.gpu_memory_gib, UsageError,
                "--memory-reserve-gib must be in [0, --gpu-memory-gib) (got ", c.memory_reserve_gib, ")");
  MEGATON_CHECK(c.peak_tflops > 0, UsageError, "--peak-tflops must be > 0 (got ", c.peak_tflops, ")");
  MEGATON_CHECK(c.intra_node_gbps > 0, UsageError, "--intra-node-gbps must be > 0 (got ", c.intra_node_gbps, ")");
  MEGATON_CHECK(c.inter_node_gbps > 0, UsageError, "--inter-node-gbps must be > 0 (got ", c.inter_node_gbps, ")");
}

}  // namespace megaton::plan
