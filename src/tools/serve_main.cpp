// megaton serve: an HTTP server for a checkpoint (OpenAI completions API, Megatron's /api); see docs/serve.md.
#include <iostream>

#include "cli/commands.h"
#include "dist/launch_env.h"
#include "dist/mpi_session.h"
#include "serve/serve_app.h"
#include "tools/subcommands.h"

namespace megaton::tools {

int run_serve(int argc, const char* const* argv) {
  const dist::LaunchEnv env = dist::detect_launch_env();
  serve::ServeOptions options;
  if (!cli::parse_serve_command(argc, argv, env.size, options, std::cout)) return 0;
  serve::BlockedStopSignals signals;  // before MPI's threads start, so they inherit the mask
  dist::MpiSession session(env);
  return serve::run_serve_app(options, env, signals);
}

}  // namespace megaton::tools
