#include "checkpoint/foreign_import.h"

#include <filesystem>

#include "checkpoint/deepspeed_layout.h"
#include "checkpoint/format.h"
#include "checkpoint/sections.h"
#include "checkpoint/serial_writer.h"
#include "checkpoint/tracker.h"
#include "core/error.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace megaton::checkpoint {

std::string import_foreign_checkpoint(const ForeignCheckpoint& fc, const std::string& save_dir, const Logger& log,
                                      int keep_last) {
  ForeignState st = read_foreign_checkpoint(fc, log);
  const int64_t vocab = st.meta.model_config.at("vocab_size").get<int64_t>();
  const int64_t padded = st.padded_vocab;
  const auto params = deepspeed_params(st.meta.model_config, padded);
  SerialWriter w(save_dir, st.meta.iteration);
  auto add = [&](const std::string& path, const std::string& name, const torch::Tensor& t, int pd) {
    if (name == "embedding.word_embeddings.weight" && padded > vocab) {
      w.add_vocab_padded(path, t, vocab, pd);
    } else {
      w.add(path, t, {{"partition_dim", pd}});
    }
  };
  for (const auto& p : params) add(model_path(p.canonical), p.canonical, st.model.at(p.canonical), p.partition_dim);
  for (const auto& [state, by_name] : st.optim)
    for (const auto& p : params)
      add(optim_path(state, p.canonical), p.canonical, by_name.at(p.canonical), p.partition_dim);
  if (padded > vocab && !st.meta.args.contains("pad_vocab_size_to")) st.meta.args["pad_vocab_size_to"] = padded;
  const std::string dst = w.finish(st.meta, st.layout, fc.dir, keep_last);
  log.info("convert: ", fc.what(), " (iteration ", st.meta.iteration, ", saved at TP=", st.layout.tp,
           " PP=", st.layout.pp, " DP=", st.layout.dp, ") -> ", dst, st.optim.empty() ? " (weights only)" : "");
  return dst;
}

std::string megaton_load_dir(const std::string& load, const Logger& log) {
  const auto fc = detect_foreign_checkpoint(load);
  if (!fc) return load;
  const std::string cache = (fs::path(load) / kImportDir).string();
  const CheckpointState meta = read_foreign_meta(*fc);
  std::string disagree;
  if (fs::is_directory(cache)) {
    const auto have = read_latest_iteration(cache, &disagree);
    if (have && *have == meta.iteration && fs::exists(checkpoint_file(cache, *have))) {
      log.info("--load ", load, ": ", fc->what(), " was converted before; loading ", checkpoint_file(cache, *have));
      return cache;
    }
  }
  log.info("--load ", load, ": ", fc->what(), " (iteration ", meta.iteration, "); converting it to ", cache);
  try {
    import_foreign_checkpoint(*fc, cache, log, /*keep_last=*/1);
  } catch (const RuntimeError& e) {
    throw CheckpointError(str(e.what(), "\n  (--load converts a DeepSpeed checkpoint into ", cache,
                              "; where that cannot be written, run `megaton convert --load ", load,
                              " --save DIR` and pass --load DIR)"));
  }
  return cache;
}

}  // namespace megaton::checkpoint
