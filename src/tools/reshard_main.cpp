// megaton reshard: offline change of a checkpoint's target layout and dtype, dropping optimizer state, or merging to
// a single-rank release checkpoint (src/checkpoint/reshard.h; docs/checkpoints.md).
#include <iostream>

#include "checkpoint/reshard.h"
#include "cli/parser.h"
#include "core/error.h"
#include "core/log.h"
#include "tools/subcommands.h"

namespace megaton::tools {

namespace po = boost::program_options;

int run_reshard(int argc, const char* const* argv) {
  std::string load, save;
  int64_t iteration = -2;
  checkpoint::ReshardOptions o;
  po::options_description d;
  d.add_options()("load", po::value(&load)->required(),
                  "source: a --save directory, an iter_NNNNNNN/ directory or its .h5 file")(
      "save", po::value(&save)->required(), "destination --save directory")(
      "target-tp", po::value(&o.target_tp)->default_value(1), "tensor-parallel size the result is meant for")(
      "target-pp", po::value(&o.target_pp)->default_value(1), "pipeline-parallel size the result is meant for")(
      "drop-optimizer", po::bool_switch(&o.drop_optimizer), "leave out the fp32 master weights and Adam moments")(
      "dtype", po::value(&o.dtype), "convert model weights: bf16 | fp16 | fp32 (default: keep)")(
      "release", po::bool_switch(&o.release), "write release/ and point the tracker at 'release'")(
      "iteration", po::value(&iteration), "iteration of --load to convert (default: its tracker's)")(
      "keep-last", po::value(&o.keep_last)->default_value(0), "keep only the newest K checkpoints in --save");
  if (!cli::parse_args("reshard",
                       "megaton reshard --load A --save B --target-tp T --target-pp P [--drop-optimizer] "
                       "[--dtype bf16] [--release]",
                       argc, argv, d, std::cout))
    return 0;
  if (iteration != -2) {
    MEGATON_CHECK(iteration >= 0, UsageError, "--iteration must be >= 0, got ", iteration);
    o.iteration = iteration;
  }
  Logger log;
  checkpoint::reshard_checkpoint(load, save, o, log);
  return 0;
}

}  // namespace megaton::tools
