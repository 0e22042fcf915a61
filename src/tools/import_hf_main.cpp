// megaton import-hf: a Hugging Face GPT-2 or BLOOM directory (config.json + model.safetensors or sharded
// safetensors) as a megaton checkpoint (weights only), to continue training or fine-tune with --load/--finetune.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "checkpoint/format.h"
#include "checkpoint/hf.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/sections.h"
#include "checkpoint/serial_writer.h"
#include "cli/parser.h"
#include "core/error.h"
#include "core/log.h"
#include "tools/subcommands.h"

namespace megaton::tools {

namespace po = boost::program_options;
namespace fs = std::filesystem;

int run_import_hf(int argc, const char* const* argv) {
  std::string hf, save, dtype;
  int64_t iteration = checkpoint::kReleaseIteration;
  po::options_description d;
  d.add_options()("hf", po::value(&hf)->required(),
                  "Hugging Face model directory (config.json, model.safetensors[.index.json])")(
      "save", po::value(&save)->required(), "output --save directory")(
      "iteration", po::value(&iteration), "iteration to record (default: a release/ checkpoint)")(
      "dtype", po::value(&dtype), "fp32 | fp16 | bf16 (default: as stored)");
  if (!cli::parse_args("import-hf", "megaton import-hf --hf DIR --save OUT [--iteration N] [--dtype bf16]", argc, argv,
                       d, std::cout))
    return 0;
  MEGATON_CHECK(iteration >= 0 || iteration == checkpoint::kReleaseIteration, UsageError,
                "--iteration must be >= 0, got ", iteration);
  std::optional<torch::ScalarType> to;
  if (dtype == "fp32" || dtype == "float32")
    to = torch::kFloat32;
  else if (dtype == "fp16" || dtype == "float16")
    to = torch::kFloat16;
  else if (dtype == "bf16" || dtype == "bfloat16")
    to = torch::kBFloat16;
  else
    MEGATON_CHECK(dtype.empty(), UsageError, "--dtype '", dtype, "': expected fp32, fp16 or bf16");
  Logger log;
  const fs::path cfg_path = fs::path(hf) / "config.json";
  MEGATON_CHECK(fs::exists(cfg_path), DataError, hf, ": no config.json");
  nlohmann::json hc;
  try {
    std::ifstream in(cfg_path);
    hc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(str(cfg_path.string(), ": not valid JSON (", e.what(), ")"));
  }
  const auto weights = checkpoint::read_hf_weights(hf);
  const auto im = checkpoint::from_hf(hc, weights, hf);
  for (const auto& k : im.unused) log.info("import-hf: not imported: ", k);
  checkpoint::SerialWriter w(save, iteration);
  for (const auto& [name, t, pd] : im.tensors)
    w.add(checkpoint::model_path(name), to ? t.to(*to) : t, {{"partition_dim", pd}});
  checkpoint::CheckpointState st;
  st.iteration = iteration;
  st.model_config = im.model_config;
  st.args = {{"imported_from", fs::absolute(hf).string()}, {"hf_config", hc}};
  const std::string dst = w.finish(st, checkpoint::SavedLayout{}, "");
  log.info("import-hf: ", hf, " (", hc.value("model_type", std::string()), ") -> ", dst, ": ", im.tensors.size(),
           " tensors; model config ", im.model_config.dump());
  return 0;
}

}  // namespace megaton::tools
