#include "checkpoint/reshard.h"

#include <filesystem>

#include "checkpoint/crc.h"
#include "checkpoint/file.h"
#include "checkpoint/format.h"
#include "checkpoint/load_path.h"
#include "checkpoint/serial_writer.h"
#include "checkpoint/tracker.h"
#include "core/error.h"
#include "core/timer.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace megaton::checkpoint {

namespace {

std::optional<torch::ScalarType> parse_dtype(const std::string& s) {
  if (s.empty()) return std::nullopt;
  if (s == "bf16" || s == "bfloat16") return torch::kBFloat16;
  if (s == "fp16" || s == "float16") return torch::kFloat16;
  if (s == "fp32" || s == "float32") return torch::kFloat32;
  throw UsageError(str("--dtype '", s, "': expected bf16, fp16 or fp32"));
}

bool is_float(torch::ScalarType t) {
  return t == torch::kFloat32 || t == torch::kFloat64 || t == torch::kFloat16 || t == torch::kBFloat16;
}

}  // namespace

void check_target_layout(const json& cfg, const json& manifest, int tp, int pp) {
  MEGATON_CHECK(tp >= 1 && pp >= 1, UsageError, "--target-tp (", tp, ") and --target-pp (", pp, ") must be >= 1");
  auto need = [&](const char* key, int by, const char* flag) {
    if (!cfg.contains(key) || !cfg[key].is_number_integer()) return;
    const int64_t v = cfg[key].get<int64_t>();
    MEGATON_CHECK(v % by == 0, UsageError, flag, " ", by, " does not divide the checkpoint's ", key, " (", v, ")");
  };
  need("num_attention_heads", tp, "--target-tp");
  need("ffn_hidden_size", tp, "--target-tp");
  need("num_layers", pp, "--target-pp");
  for (const auto& [path, rec] : manifest.at("tensors").items()) {
    const int pd = rec.value("partition_dim", -1);
    if (pd < 0 || rec.contains("role") || rec.contains("padded_rows")) continue;  // padded rows re-pad at load
    const auto shape = rec.at("shape").get<std::vector<int64_t>>();
    MEGATON_CHECK(pd < static_cast<int>(shape.size()) && shape[pd] % tp == 0, UsageError, "--target-tp ", tp,
                  " does not divide dimension ", pd, " of '", path, "' ", shape_str(shape));
  }
}

std::string reshard_checkpoint(const std::string& load, const std::string& save, const ReshardOptions& opts,
                               const Logger& log) {
  MEGATON_CHECK(!save.empty(), UsageError, "megaton reshard: --save is required");
  std::string src_path;
  if (opts.iteration) {
    src_path = (fs::path(load) / iteration_dir_name(*opts.iteration) / kFileName).string();
    MEGATON_CHECK(fs::exists(src_path), CheckpointError, "--load ", load, " --iteration ", *opts.iteration, ": no ",
                  src_path);
  } else {
    src_path = resolve_checkpoint_path(load);
  }
  const CheckpointFile src(src_path);
  check_target_layout(src.meta().model_config, src.manifest(), opts.target_tp, opts.target_pp);
  const auto to_dtype = parse_dtype(opts.dtype);
  const int64_t iteration = opts.release ? kReleaseIteration : src.iteration();
  const bool same_layout = src.layout().tp == opts.target_tp && src.layout().pp == opts.target_pp;

  // Verify the source before converting it.
  const auto problems = src.verify();
  MEGATON_CHECK(problems.empty(), CheckpointError, src_path, ": ", problems.size(),
                " tensor(s) fail verification; first '", problems.empty() ? "" : problems[0].path,
                "': ", problems.empty() ? "" : problems[0].what);

  SerialWriter out(save, iteration);
  int64_t dropped = 0, converted = 0;
  Progress shown(static_cast<double>(src.bytes_under("")), "GB", 1e9);
  double done = 0;
  for (const auto& path : src.tensor_paths()) {
    if (shown.due(kProgressEverySeconds)) log.info("reshard: ", shown.line(done));
    done += static_cast<double>(src.bytes(path));
    json rec = src.manifest()["tensors"][path];
    const bool optim = path.rfind(str(kOptimSection, "/"), 0) == 0;
    const bool rng = path.rfind(str(kRngSection, "/"), 0) == 0;
    if ((optim && opts.drop_optimizer) || (rng && !same_layout)) {
      ++dropped;
      continue;
    }
    torch::Tensor t = src.read(path);
    if (to_dtype && path.rfind(str(kModelSection, "/"), 0) == 0 && is_float(t.scalar_type()) &&
        t.scalar_type() != *to_dtype) {
      t = t.to(*to_dtype);
      ++converted;
    }
    rec.erase("crc32");
    rec.erase("dtype");
    rec.erase("shape");
    out.add(path, t, rec);
  }
  log.info("reshard: ", out.count(), " tensors written, ", converted, " converted to ",
           opts.dtype.empty() ? "-" : opts.dtype, ", ", dropped, " dropped",
           opts.drop_optimizer ? " (optimizer state)" : "", !same_layout ? " (RNG states: layout changed)" : "");
  CheckpointState st = src.meta();
  st.iteration = iteration;
  const std::string dst = out.finish(
      st, SavedLayout{opts.target_tp, opts.target_pp, 1, opts.target_tp * opts.target_pp}, src_path, opts.keep_last);
  log.info("reshard: ", src_path, " (TP=", src.layout().tp, " PP=", src.layout().pp, ") -> ", dst,
           " (TP=", opts.target_tp, " PP=", opts.target_pp, ")");
  return dst;
}

}  // namespace megaton::checkpoint
