// megaton eval: zero-shot WIKITEXT103 perplexity and LAMBADA accuracy (tasks/main.py); see docs/eval.md.
#include <iostream>

#include "cli/commands.h"
#include "dist/launch_env.h"
#include "dist/mpi_session.h"
#include "eval/eval_app.h"
#include "tools/subcommands.h"

namespace megaton::tools {

int run_eval(int argc, const char* const* argv) {
  const dist::LaunchEnv env = dist::detect_launch_env();
  eval::EvalOptions options;
  if (!cli::parse_eval_command(argc, argv, env.size, options, std::cout)) return 0;
  dist::MpiSession session(env);
  return eval::run_eval_app(options, env, std::cout);
}

}  // namespace megaton::tools
