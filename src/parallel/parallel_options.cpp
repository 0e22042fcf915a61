#include "parallel/parallel_options.h"

#include "core/error.h"

namespace megaton::parallel {

void ParallelOptions::validate(int world) {
  const int tp = tensor_model_parallel_size, pp = pipeline_model_parallel_size;
  MEGATON_CHECK(tp >= 1 && pp >= 1, UsageError, "--tensor-model-parallel-size (", tp,
                ") and --pipeline-model-parallel-size (", pp, ") must be >= 1");
  MEGATON_CHECK(world % (tp * pp) == 0, UsageError, "world size (", world,
                ") must be divisible by --tensor-model-parallel-size x --pipeline-model-parallel-size (", tp, " x ", pp,
                ")");
  world_size = world;
  data_parallel_size = world / (tp * pp);
  if (num_layers_per_virtual_pipeline_stage > 0) {
    // Megatron asks for PP > 2 because its batched 4-way p2p op mismatches messages between two ranks; ours keeps
    // the forward and backward rings apart, so PP = 2 works (parallel/pipeline/schedules.h).
    MEGATON_CHECK(pp >= 2, UsageError,
                  "--num-layers-per-virtual-pipeline-stage needs --pipeline-model-parallel-size >= 2 (got ", pp, ")");
    MEGATON_CHECK(pp_partition_method != "parameters", UsageError,
                  "--pp-partition-method parameters cannot be combined with --num-layers-per-virtual-pipeline-stage "
                  "(every model chunk holds that many layers)");
  }
  MEGATON_CHECK(num_layers_per_virtual_pipeline_stage >= 0, UsageError,
                "--num-layers-per-virtual-pipeline-stage must be >= 0 (0 = not interleaved)");
  MEGATON_CHECK(pp_partition_method == "uniform" || pp_partition_method == "parameters" ||
                    pp_partition_method.rfind("type:", 0) == 0,
                UsageError, "--pp-partition-method: expected uniform|parameters|type:transformer, got '",
                pp_partition_method, "'");
  MEGATON_CHECK(zero_stage == 0 || zero_stage == 1, UsageError, "--zero-stage: supported stages are 0 and 1, got ",
                zero_stage);
}

}  // namespace megaton::parallel
