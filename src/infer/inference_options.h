// What `megaton generate` and `megaton eval` build a model from: the architecture, kernels, layout and precision of
// the checkpoint's run (the same flags as training), the tokenizer, and the checkpoint to load.
#pragma once
#include <cstdint>
#include <string>

#include "data/tokenizer_options.h"
#include "dist/dist_options.h"
#include "model/gpt_options.h"
#include "ops/kernel_options.h"
#include "optim/precision_options.h"
#include "parallel/parallel_options.h"

namespace megaton::infer {

struct InferenceOptions {
  model::GptOptions model;
  ops::KernelOptions kernels;
  parallel::ParallelOptions parallel;
  dist::DistOptions dist;
  optim::PrecisionOptions precision;
  data::TokenizerOptions tokenizer;
  std::string load;  // checkpoint directory; "" runs the random initial weights of `seed`
  int64_t seed = 1234;
  int micro_batch_size = 0;  // 0 -> 1 (validate)
  std::string log_level = "info";
  std::string notes;  // what came from the checkpoint rather than the command line (logged at start)
  // Training flags a script may pass along; generation and evaluation warn that they do not apply.
  bool reset_position_ids = false;
  bool reset_attention_mask = false;

  /// The model's, layout's and precision's rules for a job of `world` ranks; --seq-length and --tokenizer-type
  /// required; no interleaved pipeline. `command` names the subcommand in the messages. Idempotent.
  void validate(int world, const std::string& command);
};

}  // namespace megaton::infer
