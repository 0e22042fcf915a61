// megaton train: the pretraining entry point (pretrain_gpt.py's replacement).
#include <iostream>

#include "cli/commands.h"
#include "core/error.h"
#include "dist/launch_env.h"
#include "dist/mpi_session.h"
#include "tools/subcommands.h"
#include "train/layout_estimate.h"
#include "train/train_config.h"
#include "train/trainer.h"

namespace megaton::tools {

int run_train(int argc, const char* const* argv) {
  const dist::LaunchEnv env = dist::detect_launch_env();
  train::TrainConfig cfg;
  if (!cli::parse_train_command(argc, argv, env.size, cfg, std::cout)) return 0;
  if (cfg.loop.dry_run) {
    const int64_t vocab = cfg.vocab_size > 0 ? cfg.vocab_size : 50257;
    const int64_t padded = cfg.model.padded_vocab_size(vocab, cfg.parallel.tensor_model_parallel_size);
    if (env.rank == 0) {
      for (const std::string& note : cfg.notes) std::cout << note << "\n";
      std::cout << train::describe_layout(cfg, vocab, padded) << std::flush;
    }
    return 0;
  }
  dist::MpiSession session(env);
  train::Trainer trainer(std::move(cfg), env, std::cout);
  return trainer.run();
}

}  // namespace megaton::tools
