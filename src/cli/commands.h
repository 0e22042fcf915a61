// The command lines of the subcommands that take Megatron's flags: each parses argv into its options structs, applies
// the DeepSpeed JSON where given, and validates everything before the command allocates anything or talks to another
// rank. Each returns false after printing --help to `help_out`; bad or inconsistent flags are UsageErrors naming them.
#pragma once
#include <ostream>

#include "eval/eval_app.h"
#include "infer/generate_app.h"
#include "serve/serve_options.h"
#include "train/train_config.h"

namespace megaton::cli {

/// `megaton train` (argv[0] = "train"): pretrain_gpt.py's flags. `world_size` is the job's, unless --dry-run
/// --world-size overrides it.
bool parse_train_command(int argc, const char* const* argv, int world_size, train::TrainConfig& config,
                         std::ostream& help_out);

/// `megaton generate` (argv[0] = "generate"): tools/generate_samples_gpt.py's flags.
bool parse_generate_command(int argc, const char* const* argv, int world_size, infer::GenerateAppOptions& options,
                            std::ostream& help_out);

/// `megaton eval` (argv[0] = "eval"): tasks/main.py's flags for the zero-shot GPT tasks.
bool parse_eval_command(int argc, const char* const* argv, int world_size, eval::EvalOptions& options,
                        std::ostream& help_out);

/// `megaton serve` (argv[0] = "serve"): the model's flags as generate's, and the server's own.
bool parse_serve_command(int argc, const char* const* argv, int world_size, serve::ServeOptions& options,
                         std::ostream& help_out);

/// The inference side of Megatron's flags (what generate and eval build their model from).
infer::InferenceOptions inference_options(const train::TrainConfig& flags);

}  // namespace megaton::cli
