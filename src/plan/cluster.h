// The machine `megaton plan` plans for: nodes of identical GPUs, a fast link inside a node and a slower one between
// nodes. Bandwidths are per GPU, in GB/s (10^9 bytes per second, not bits: 400 Gbit/s InfiniBand per GPU = 50).
#pragma once

namespace megaton::plan {

struct Cluster {
  int nodes = 1;
  int gpus_per_node = 8;
  double gpu_memory_gib = 80.0;     // usable memory of one GPU
  double memory_reserve_gib = 2.0;  // kept free for the CUDA context, cuBLAS workspaces, fragmentation
  double peak_tflops = 989.0;       // dense peak of one GPU in the training dtype (H100/H200 SXM bf16: 989)
  double intra_node_gbps = 360.0;   // achieved all-reduce bus bandwidth inside a node (NVLink)
  double inter_node_gbps = 50.0;    // achieved bus bandwidth between nodes, per GPU (one 400 Gbit/s NIC per GPU)

  int world() const { return nodes * gpus_per_node; }
};

/// Refuses impossible values with a UsageError naming the flag (--nodes, --gpus-per-node, ...).
void validate_cluster(const Cluster& c);

}  // namespace megaton::plan
