// DeepSpeed's pipeline partitioning by layer type (PipelineModule's partition_method "type:REGEX"), as the versions
// Megatron-DeepSpeed's runs used compute it (partition_balanced by binary search on the bottleneck, before DeepSpeed
// replaced it with a dynamic program): over the fork's GPTModelPipe layer list
//   _to_float16, EmbeddingPipe, <lambda>, ParallelTransformerLayerPipe x L, undo, MixedFusedLayerNorm, EmbeddingPipe
//   [, float16_to_fp32 with --fp16/--bf16]
// each layer whose class or function name matches REGEX (case-insensitive search) weighs 1, the rest 0. BLOOM-176B's
// 'type:transformer|embedding' over 12 stages gives 5 transformer layers to the first and last stages, 6 to the others.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace megaton::model {

/// DeepSpeed's partition_balanced (binary search, eps 1e-3) of `weights` into `parts` ranges: parts + 1 boundaries.
std::vector<int64_t> deepspeed_partition_balanced(const std::vector<double>& weights, int parts);

/// Transformer layers per stage for partition method `method` ("type:REGEX") with `num_layers` layers on `stages`
/// stages; `half`: --fp16 or --bf16 (the layer list ends with float16_to_fp32). UsageError for a bad regex.
std::vector<int> deepspeed_type_partition(const std::string& method, int num_layers, int stages, bool half);

}  // namespace megaton::model
