// megaton generate: text generation from a checkpoint (tools/generate_samples_gpt.py); see docs/generate.md.
#include <iostream>

#include "cli/commands.h"
#include "dist/launch_env.h"
#include "dist/mpi_session.h"
#include "infer/generate_app.h"
#include "tools/subcommands.h"

namespace megaton::tools {

int run_generate(int argc, const char* const* argv) {
  const dist::LaunchEnv env = dist::detect_launch_env();
  infer::GenerateAppOptions options;
  if (!cli::parse_generate_command(argc, argv, env.size, options, std::cout)) return 0;
  dist::MpiSession session(env);
  return infer::run_generate_app(options, env, std::cin, std::cout);
}

}  // namespace megaton::tools
