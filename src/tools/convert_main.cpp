// megaton convert: between megaton checkpoints and Megatron-DeepSpeed's (src/checkpoint/fork_checkpoint.h,
// ds_universal_writer.h; docs/checkpoints.md).
//   megaton convert --load FORK_DIR --save DIR                  a DeepSpeed (pipeline or universal) checkpoint in
//                                                               megaton's format, with its optimizer and progress
//   megaton convert --load DIR --save FORK_DIR --to ds-universal [--target-tp T --target-pp P]
//                                                               the way back: a universal checkpoint the fork
//                                                               loads with --universal-checkpoint
#include <iostream>

#include "checkpoint/ds_universal_writer.h"
#include "checkpoint/file.h"
#include "checkpoint/foreign_import.h"
#include "checkpoint/fork_checkpoint.h"
#include "checkpoint/load_path.h"
#include "cli/parser.h"
#include "core/error.h"
#include "core/log.h"
#include "model/deepspeed_partition.h"
#include "tools/subcommands.h"

namespace megaton::tools {

namespace po = boost::program_options;

int run_convert(int argc, const char* const* argv) {
  std::string load, save, to = "megaton";
  int target_tp = 0, target_pp = 0;
  po::options_description d;
  d.add_options()("load", po::value(&load)->required(),
                  "source: a Megatron-DeepSpeed --save directory or step folder (DeepSpeed pipeline or universal "
                  "checkpoint); with --to ds-universal, a megaton checkpoint")(
      "save", po::value(&save)->required(), "destination directory")("to", po::value(&to),
                                                                     "megaton (the default) | ds-universal")(
      "target-tp", po::value(&target_tp), "--to ds-universal: TP of the model-state files (default: as saved)")(
      "target-pp", po::value(&target_pp), "--to ds-universal: PP of the model-state files (default: as saved)");
  if (!cli::parse_args("convert",
                       "megaton convert --load FORK_CKPT --save DIR | --load DIR --save FORK_DIR --to ds-universal",
                       argc, argv, d, std::cout))
    return 0;
  Logger log;
  if (to == "megaton") {
    const auto fc = checkpoint::detect_foreign_checkpoint(load);
    MEGATON_CHECK(fc, UsageError, "--load ", load,
                  ": not a Megatron-DeepSpeed checkpoint (no 'latest' naming a global_stepN folder with "
                  "mp_rank_00_model_states.pt, no 'latest_universal'); for a megaton checkpoint use --to ds-universal");
    checkpoint::import_foreign_checkpoint(*fc, save, log);
    return 0;
  }
  MEGATON_CHECK(to == "ds-universal", UsageError, "--to '", to, "': expected megaton or ds-universal");
  const checkpoint::CheckpointFile src(checkpoint::resolve_checkpoint_path(load));
  const auto problems = src.verify();
  MEGATON_CHECK(problems.empty(), CheckpointError, src.path(), ": ", problems.size(),
                " tensor(s) fail verification; first '", problems.empty() ? "" : problems[0].path,
                "': ", problems.empty() ? "" : problems[0].what);
  checkpoint::UniversalOptions o;
  o.target_tp = target_tp > 0 ? target_tp : src.layout().tp;
  o.target_pp = target_pp > 0 ? target_pp : src.layout().pp;
  const auto& cfg = src.meta().model_config;
  const auto& args = src.meta().args;
  const int layers = cfg.at("num_layers").get<int>();
  MEGATON_CHECK(o.target_pp >= 1 && o.target_pp <= layers && o.target_tp >= 1, UsageError, "--target-pp ", o.target_pp,
                " / --target-tp ", o.target_tp, " do not fit ", layers, " layers");
  const std::string method = args.contains("pp_partition_method") && args["pp_partition_method"].is_string()
                                 ? args["pp_partition_method"].get<std::string>()
                                 : "type:transformer";
  const bool half = args.value("bf16", false) || args.value("fp16", false);
  o.layers_per_stage = model::deepspeed_type_partition(method, layers, o.target_pp, half);
  checkpoint::write_ds_universal(src, save, o, log);
  return 0;
}

}  // namespace megaton::tools
