// The parallel layout of a job (Megatron's _add_distributed_args and ZeRO): tensor and pipeline sizes, the
// interleaved schedule's virtual stages, how layers are spread over stages, ZeRO-1, and the data-parallel gradient
// buckets. The data-parallel size follows from the world size (validate).
#pragma once
#include <cstdint>
#include <string>

namespace megaton::parallel {

struct ParallelOptions {
  int tensor_model_parallel_size = 1;
  int pipeline_model_parallel_size = 1;
  int num_layers_per_virtual_pipeline_stage = 0;  // 0: not interleaved
  std::string pp_partition_method = "uniform";    // uniform | parameters | type:REGEX (model::partition_layers)
  int zero_stage = 0;                             // 0 | 1
  int64_t dp_bucket_size_mb = 25;
  bool overlap_grad_reduce = true;   // start each DP bucket's reduction during backward (--no-overlap-grad-reduce: not)
  bool overlap_param_gather = true;  // ZeRO-1: the parameter all-gather overlaps the next forward (--no-...: not)
  bool sync_tp_duplicated_parameters = false;  // average the TP-replicated parameters' gradients over TP (BigScience)
  // Derived by validate():
  int data_parallel_size = 1;
  int world_size = 1;

  /// Checks sizes and names and that world_size divides into TP x PP; fills data_parallel_size and world_size.
  /// Idempotent. The model's own constraints (heads, layers per stage) are model::check_layout's.
  void validate(int world);
  bool interleaved() const { return num_layers_per_virtual_pipeline_stage > 0; }
};

}  // namespace megaton::parallel
