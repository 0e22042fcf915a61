// The model side shared by `megaton generate` and `megaton eval`: the flags they both take (Megatron's model,
// parallel, precision, checkpoint, tokenizer and training groups, as their scripts pass them), and the job's process
// groups + this rank's GPT stage + the tokenizer, with weights loaded from --load at whatever TP/PP they were saved.
#pragma once
#include <boost/program_options.hpp>
#include <torch/torch.h>

#include <memory>

#include "cli/arguments.h"
#include "core/log.h"
#include "data/tokenizer.h"
#include "dist/launch_env.h"
#include "dist/process_groups.h"
#include "model/gpt_stage.h"

namespace megaton::infer {

struct ModelFlags {
  cli::ModelArgs model;
  cli::ParallelArgs parallel;
  cli::TrainingArgs training;  // --micro-batch-size, --seed, --log-interval (the rest is accepted and ignored)
  cli::PrecisionArgs precision;
  cli::CheckpointArgs checkpoint;
  cli::DataArgs data;
  cli::LoggingArgs logging;
};

/// Registers every group of `f` on `d`.
void add_model_flags(boost::program_options::options_description& d, ModelFlags& f);

/// validate_model/parallel/precision; --seq-length and --tokenizer-type required; micro-batch-size defaults to 1.
void validate_model_flags(ModelFlags& f, int world_size, const std::string& command);

/// The params dtype of --fp16 / --bf16.
torch::ScalarType params_dtype(const cli::PrecisionArgs& p);

struct InferenceModel {
  explicit InferenceModel(dist::ProcessGroups g) : groups(std::move(g)) {}
  dist::ProcessGroups groups;
  std::unique_ptr<data::Tokenizer> tokenizer;
  model::GptConfig config;
  std::unique_ptr<model::GptStage> stage;
  int64_t loaded_iteration = -1;  // -1: random init (no --load)
};

/// Collective over the job: builds the groups, the tokenizer, this rank's stage, and loads --load (weights only;
/// CheckpointError if the checkpoint's architecture differs from the flags). Without --load the weights are the
/// deterministic random init of --seed (a warning says so).
std::unique_ptr<InferenceModel> build_inference_model(const ModelFlags& f, const dist::LaunchEnv& env, Logger& log);

}  // namespace megaton::infer
