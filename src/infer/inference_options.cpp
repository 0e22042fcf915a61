#include "infer/inference_options.h"

#include "core/error.h"
#include "model/gpt_config.h"

namespace megaton::infer {

void InferenceOptions::validate(int world, const std::string& command) {
  model.validate();
  MEGATON_CHECK(model.seq_length > 0, UsageError, "--seq-length is required for megaton ", command);
  parallel.validate(world);
  model::check_layout(model, parallel);
  MEGATON_CHECK(!parallel.interleaved(), UsageError,
                "--num-layers-per-virtual-pipeline-stage: the interleaved pipeline is not supported by megaton ",
                command);
  dist.validate();
  precision.validate(model.fp32_residual_connection);
  MEGATON_CHECK(!tokenizer.tokenizer_type.empty(), UsageError, "megaton ", command,
                " needs --tokenizer-type (GPT2BPETokenizer with --vocab-file/--merge-file, or PretrainedFromHF with "
                "--tokenizer-name-or-path)");
  if (micro_batch_size == 0) micro_batch_size = 1;
  MEGATON_CHECK(micro_batch_size > 0, UsageError, "--micro-batch-size must be > 0, got ", micro_batch_size);
}

}  // namespace megaton::infer
