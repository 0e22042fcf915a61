#include "train/train_config.h"

#include "cli/deepspeed_config.h"
#include "cli/parser.h"
#include "core/error.h"

namespace megaton::train {

namespace po = boost::program_options;

void add_train_options(po::options_description& d, TrainConfig& c) {
  cli::add_megatron_options(d, c.model, c.parallel, c.training, c.precision, c.checkpoint, c.data, c.logging);
  po::options_description extra("megaton train");
  extra.add_options()("world-size", po::value<int>(&c.dry_run_world_size)->default_value(0),
                      "with --dry-run: the world size to plan for (default: the launcher's)")(
      "vocab-size", po::value<int64_t>(&c.vocab_size)->default_value(0),
      "vocabulary size when no tokenizer is given (default 50257, GPT-2)");
  d.add(extra);
}

bool parse_train_config(int argc, const char* const* argv, int world_size, TrainConfig& c, std::ostream& help_out) {
  po::options_description d;
  add_train_options(d, c);
  if (!cli::parse_args("train", "Pretrain a GPT model (replaces pretrain_gpt.py; takes its flags).", argc, argv, d,
                       help_out))
    return false;
  int world = world_size;
  if (c.dry_run_world_size > 0) {
    MEGATON_CHECK(c.training.dry_run, UsageError, "--world-size is only for --dry-run; the launcher sets the world");
    world = c.dry_run_world_size;
  }
  cli::validate_model(c.model);
  MEGATON_CHECK(c.model.seq_length > 0, UsageError, "--seq-length is required for megaton train");
  cli::validate_parallel(c.parallel, c.model, world);
  const auto& t = c.training;
  if (t.deepspeed || !t.deepspeed_config.empty()) {
    MEGATON_CHECK(t.deepspeed && !t.deepspeed_config.empty(), UsageError,
                  t.deepspeed ? "--deepspeed needs --deepspeed_config FILE (the DeepSpeed JSON)"
                              : "--deepspeed_config is read only with --deepspeed (as in Megatron-DeepSpeed)");
    c.deepspeed_notes = cli::apply_deepspeed_config(t.deepspeed_config, c.training, c.precision, c.parallel);
  }
  cli::validate_training(c.training, c.parallel);
  cli::validate_precision(c.precision, c.model);
  cli::validate_checkpoint(c.checkpoint);
  cli::validate_data(c.data);
  cli::validate_logging(c.logging);
  return true;
}

}  // namespace megaton::train
