// `megaton generate` (Megatron's tools/generate_samples_gpt.py): its options and the three modes
//   --num-samples N --genfile F      unconditional samples from [EOD], JSONL {"text", "length", "finished"}
//   --sample-input-file F            one prompt a line -> --sample-output-file (default F.out):
//                                    "\nContext:" + prompt + "\n\nMegatron-LM:" + continuation + "\n"
//   neither                          interactive prompt on stdin ("stop" ends it)
#pragma once
#include <iosfwd>
#include <string>

#include "dist/launch_env.h"
#include "infer/generator.h"
#include "infer/inference_model.h"

namespace megaton::infer {

struct GenerateAppOptions {
  InferenceOptions model;
  double temperature = 1.0;
  bool greedy = false;
  double top_p = 0.0;
  int64_t top_k = 0;
  int64_t out_seq_length = 1024;
  std::string sample_input_file;
  std::string sample_output_file;
  int64_t num_samples = 0;
  std::string genfile;
  bool recompute = false;
  bool ignore_eos = false;  // megaton extension (benchmarks): decode to the full length, EOS or not

  /// The model's options (InferenceOptions::validate), the sampling settings and the mode's flags together; fills
  /// sample_output_file from sample_input_file. UsageError for bad or inconsistent flags.
  void validate(int world);
};

/// Runs the selected mode; collective over the job. `in`/`out` are the interactive streams (rank 0 reads).
int run_generate_app(const GenerateAppOptions& f, const dist::LaunchEnv& env, std::istream& in, std::ostream& out);

/// Megatron's unconditional JSONL record for one row: {"text": detokenize(tokens[1:length-1]), "length": length-1,
/// "finished": length < seq_length - 1} (its off-by-one kept: the token before the EOS is not in "text").
std::string unconditional_record(const GenerateResult& r, int64_t row, int64_t seq_length, const data::Tokenizer& tok);

/// The conditional output block for one prompt: "\nContext:" + prompt + "\n\nMegatron-LM:" + continuation + "\n",
/// where continuation = detokenize(all tokens) without its first len(prompt) characters (code points, as Python).
std::string conditional_block(const std::string& prompt, const std::string& full_text);

}  // namespace megaton::infer
