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
#include "data/hf_tokenizer.h"
#include "tools/subcommands.h"

namespace megaton::tools {

namespace po = boost::program_options;
namespace fs = std::filesystem;

int run_import_hf(int argc, const char* const* argv) {
  std::string hf, save, dtype;
  int64_t iteration = checkpoint::kReleaseIteration, vocab_size = 0;
  po::options_description d;
  d.add_options()("hf", po::value(&hf)->required(),
                  "Hugging Face model directory (config.json, model.safetensors[.index.json])")(
      "save", po::value(&save)->required(), "output --save directory")(
      "iteration", po::value(&iteration), "iteration to record (default: a release/ checkpoint)")(
      "dtype", po::value(&dtype), "fp32 | fp16 | bf16 (default: as stored)")(
      "vocab-size", po::value(&vocab_size),
      "the tokenizer's vocabulary when the embedding has more rows, the rest being padding (default: the size of "
      "DIR/tokenizer.json when it is smaller than config.json's vocab_size, as for the hub's BLOOMs: 250680 of "
      "250880)");
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
  checkpoint::hf_model_config(hc, hf);  // config.json's errors before any weight is read
  const auto weights = checkpoint::read_hf_weights(hf);
  auto im = checkpoint::from_hf(hc, weights, hf);
  for (const auto& k : im.unused) log.info("import-hf: not imported: ", k);
  // The embedding's rows are config.json's vocab_size; the tokenizer may have fewer (the hub's BLOOMs: 250680 tokens,
  // 250880 rows, as BigScience trained them with --pad-vocab-size-to 250880). The rows past the tokenizer's are
  // vocabulary padding, stored as megaton stores padding, so the model loads with the tokenizer's vocabulary.
  const int64_t rows = im.model_config.at("vocab_size").get<int64_t>();
  const fs::path tokenizer_json = fs::path(hf) / "tokenizer.json";
  const bool has_tokenizer = fs::exists(tokenizer_json);
  if (vocab_size == 0 && has_tokenizer) {
    const int64_t v = data::HfTokenizer(hf).vocab_size();
    if (v < rows) vocab_size = v;
  }
  MEGATON_CHECK(vocab_size >= 0 && vocab_size <= rows, UsageError, "--vocab-size ", vocab_size, ": expected 1..", rows,
                " (the embedding's rows in ", cfg_path.string(), ")");
  const bool padded = vocab_size > 0 && vocab_size < rows;
  checkpoint::SerialWriter w(save, iteration);
  for (const auto& [name, t, pd] : im.tensors) {
    const torch::Tensor v = to ? t.to(*to) : t;
    if (padded && name == "embedding.word_embeddings.weight") {
      w.add_vocab_padded(checkpoint::model_path(name), v, vocab_size, pd);
    } else {
      w.add(checkpoint::model_path(name), v, {{"partition_dim", pd}});
    }
  }
  if (padded) {
    im.model_config["vocab_size"] = vocab_size;
    log.info("import-hf: vocabulary ", vocab_size, " of the embedding's ", rows,
             " rows; the rest is padding (train and generate with --pad-vocab-size-to ", rows, ")");
  }
  checkpoint::CheckpointState st;
  st.iteration = iteration;
  st.model_config = im.model_config;
  st.args = {{"imported_from", fs::absolute(hf).string()}, {"hf_config", hc}};
  if (has_tokenizer) {  // what generate/eval take when no tokenizer flags are given (cli/checkpoint_args.h)
    st.args["tokenizer_type"] = "PretrainedFromHF";
    st.args["tokenizer_name_or_path"] = fs::absolute(hf).string();
  }
  if (padded) st.args["pad_vocab_size_to"] = rows;
  const std::string dst = w.finish(st, checkpoint::SavedLayout{}, "");
  log.info("import-hf: ", hf, " (", hc.value("model_type", std::string()), ") -> ", dst, ": ", im.tensors.size(),
           " tensors; model config ", im.model_config.dump());
  return 0;
}

}  // namespace megaton::tools
