// `megaton eval` (Megatron's tasks/main.py for the zero-shot GPT tasks):
//   --task WIKITEXT103 --valid-data wiki.test.tokens [--overlapping-eval N]   word-level perplexity
//   --task LAMBADA --valid-data lambada_test.jsonl [--strict-lambada]         last-word accuracy
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

#include "dist/launch_env.h"
#include "infer/inference_model.h"

namespace megaton::eval {

struct EvalOptions {
  infer::InferenceOptions model;
  std::string task;                     // WIKITEXT103 | LAMBADA
  std::vector<std::string> valid_data;  // one file
  int64_t overlapping_eval = 32;        // Megatron's default
  bool strict_lambada = false;
  std::string results_file;  // optional JSON of the numbers

  /// The model's options (InferenceOptions::validate), a known task with one data file, a positive stride (capped
  /// at --seq-length).
  void validate(int world);
};

/// Collective; prints Megatron's result line on global rank 0 to `out`.
int run_eval_app(const EvalOptions& f, const dist::LaunchEnv& env, std::ostream& out);

}  // namespace megaton::eval
