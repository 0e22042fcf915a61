// Every flag of `megaton train`, parsed and validated together before anything is allocated.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "cli/arguments.h"

namespace megaton::train {

struct TrainConfig {
  cli::ModelArgs model;
  cli::ParallelArgs parallel;
  cli::TrainingArgs training;
  cli::PrecisionArgs precision;
  cli::CheckpointArgs checkpoint;
  cli::DataArgs data;
  cli::LoggingArgs logging;
  int dry_run_world_size = 0;                // --world-size, for --dry-run away from the cluster
  int64_t vocab_size = 0;                    // --vocab-size: used when no tokenizer is given (dry runs, synthetic data)
  std::vector<std::string> deepspeed_notes;  // what --deepspeed_config set or ignored, logged when training starts
};

/// Registers every option group of `megaton train` on `d`, bound to `c`.
void add_train_options(boost::program_options::options_description& d, TrainConfig& c);

/// Parses argv (argv[0] = "train"). Returns false after printing --help. `world_size` is the job's world, used
/// unless --dry-run --world-size overrides it.
bool parse_train_config(int argc, const char* const* argv, int world_size, TrainConfig& c, std::ostream& help_out);

}  // namespace megaton::train
