// The model side shared by `megaton generate` and `megaton eval`: the job's process groups, this rank's GPT stage and
// the tokenizer, with weights loaded from --load at whatever TP/PP they were saved.
#pragma once
#include <torch/torch.h>

#include <memory>

#include "core/log.h"
#include "data/tokenizer.h"
#include "dist/launch_env.h"
#include "dist/process_groups.h"
#include "infer/inference_options.h"
#include "model/gpt_stage.h"

namespace megaton::infer {

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
std::unique_ptr<InferenceModel> build_inference_model(const InferenceOptions& f, const dist::LaunchEnv& env,
                                                      Logger& log);

}  // namespace megaton::infer
