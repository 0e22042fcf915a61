// megaton export-hf: a checkpoint's model weights as a Hugging Face transformers directory (config.json +
// model.safetensors), GPT-2 or BLOOM architecture (src/checkpoint/hf.h has the name and layout mapping).
#include <filesystem>
#include <fstream>
#include <iostream>

#include "checkpoint/file.h"
#include "checkpoint/hf.h"
#include "checkpoint/load_path.h"
#include "checkpoint/safetensors.h"
#include "cli/parser.h"
#include "core/error.h"
#include "core/log.h"
#include "core/timer.h"
#include "tools/subcommands.h"

namespace megaton::tools {

namespace po = boost::program_options;
namespace fs = std::filesystem;

int run_export_hf(int argc, const char* const* argv) {
  std::string load, out, arch = "auto", dtype;
  po::options_description d;
  d.add_options()("load", po::value(&load)->required(),
                  "checkpoint: a --save directory, an iter_NNNNNNN/ directory or its file")(
      "out", po::value(&out)->required(), "output directory (created): config.json, model.safetensors")(
      "arch", po::value(&arch)->default_value("auto"), "gpt2 | bloom | auto (bloom for ALiBi models)")(
      "dtype", po::value(&dtype), "fp32 | fp16 | bf16 (default: the checkpoint's)");
  if (!cli::parse_args("export-hf", "megaton export-hf --load CKPT --out DIR [--arch gpt2|bloom] [--dtype bf16]", argc,
                       argv, d, std::cout))
    return 0;
  Logger log;
  const checkpoint::CheckpointFile f(checkpoint::resolve_checkpoint_path(load));
  const auto& cfg = f.meta().model_config;
  const checkpoint::HfArch a = checkpoint::choose_hf_arch(cfg, arch);
  std::optional<torch::ScalarType> to;
  if (dtype == "fp32" || dtype == "float32")
    to = torch::kFloat32;
  else if (dtype == "fp16" || dtype == "float16")
    to = torch::kFloat16;
  else if (dtype == "bf16" || dtype == "bfloat16")
    to = torch::kBFloat16;
  else
    MEGATON_CHECK(dtype.empty(), UsageError, "--dtype '", dtype, "': expected fp32, fp16 or bf16");
  torch::ScalarType seen = torch::kFloat32;
  Progress shown(static_cast<double>(f.bytes_under("model/")), "GB", 1e9);
  double done = 0;
  auto get = [&](const std::string& name) {
    if (shown.due(kProgressEverySeconds)) log.info("export-hf: ", shown.line(done));
    done += static_cast<double>(f.bytes("model/" + name));
    torch::Tensor t = f.read_model(name);
    seen = t.scalar_type();
    return to ? t.to(*to) : t;
  };
  const auto tensors = checkpoint::to_hf(get, cfg, a);
  fs::create_directories(out);
  checkpoint::write_safetensors((fs::path(out) / "model.safetensors").string(), tensors, {{"format", "pt"}});
  std::ofstream((fs::path(out) / "config.json").string())
      << checkpoint::hf_config(cfg, a, to ? *to : seen).dump(2) << "\n";
  log.info("export-hf: ", f.path(), " (iteration ", f.iteration(), ") -> ", out, ": ", tensors.size(), " tensors as ",
           a == checkpoint::HfArch::kGpt2 ? "GPT-2" : "BLOOM");
  return 0;
}

}  // namespace megaton::tools
