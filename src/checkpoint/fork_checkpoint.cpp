#include "checkpoint/fork_checkpoint.h"

#include <filesystem>

#include "checkpoint/fork_common.h"
#include "checkpoint/format.h"
#include "core/error.h"

namespace fs = std::filesystem;

namespace megaton::checkpoint {

namespace {

using fork::all_digits;
using fork::first_line;
using fork::mp_file;

std::optional<ForeignCheckpoint> classify(const fs::path& dir, const std::string& root) {
  if (!fs::is_regular_file(dir / "mp_rank_00_model_states.pt")) return std::nullopt;
  const bool universal = fs::is_directory(dir / "zero");
  return ForeignCheckpoint{universal ? ForeignFormat::kDeepSpeedUniversal : ForeignFormat::kDeepSpeed, root,
                           dir.string()};
}

}  // namespace

std::string ForeignCheckpoint::what() const {
  switch (format) {
    case ForeignFormat::kDeepSpeed:
      return "DeepSpeed checkpoint " + dir;
    case ForeignFormat::kDeepSpeedUniversal:
      return "DeepSpeed universal checkpoint " + dir;
    case ForeignFormat::kMegatron:
      return "Megatron checkpoint " + dir;
  }
  return dir;
}

std::optional<ForeignCheckpoint> detect_foreign_checkpoint(const std::string& load) {
  const fs::path p(load);
  if (!fs::is_directory(p)) return std::nullopt;
  if (auto c = classify(p, load)) return c;
  if (fs::is_regular_file(p / kTrackerFile)) {
    const std::string tag = first_line(p / kTrackerFile);
    if (all_digits(tag) || tag == kReleaseName) return std::nullopt;  // megaton's own tracker
    if (!tag.empty() && fs::is_directory(p / tag))
      if (auto c = classify(p / tag, load)) return c;
  }
  if (fs::is_regular_file(p / "latest_universal")) {
    const std::string tag = first_line(p / "latest_universal");
    const fs::path d = fs::path(tag).is_absolute() ? fs::path(tag) : p / tag;
    if (!tag.empty())
      if (auto c = classify(d, load)) return c;
  }
  if (fs::is_regular_file(p / kMegatronTrackerFile)) {
    const std::string tag = first_line(p / kMegatronTrackerFile);
    const fs::path d = p / (tag == kReleaseName ? std::string(kReleaseName)
                                                : (all_digits(tag) ? iteration_dir_name(std::stoll(tag)) : tag));
    if (fs::is_directory(d) && !fs::exists(d / kFileName) &&
        (fs::exists(d / "mp_rank_00" / "model_optim_rng.pt") ||
         fs::exists(d / "mp_rank_00_000" / "model_optim_rng.pt")))
      return ForeignCheckpoint{ForeignFormat::kMegatron, load, d.string()};
  }
  return std::nullopt;
}

namespace {
/// The file whose args and counters describe the checkpoint: mp_rank_00's.
std::string meta_file(const ForeignCheckpoint& fc) {
  if (fc.format != ForeignFormat::kMegatron) return mp_file(fc.dir, 0);
  const fs::path d(fc.dir);
  return (fs::exists(d / "mp_rank_00") ? d / "mp_rank_00" : d / "mp_rank_00_000") / "model_optim_rng.pt";
}
}  // namespace

CheckpointState read_foreign_meta(const ForeignCheckpoint& fc) {
  return fork::read_meta(meta_file(fc)).meta;
}

ForeignState read_foreign_checkpoint(const ForeignCheckpoint& fc, const Logger& log) {
  const fork::Meta mm = fork::read_meta(meta_file(fc));
  ForeignState out;
  out.meta = mm.meta;
  out.padded_vocab = mm.padded_vocab;
  switch (fc.format) {
    case ForeignFormat::kDeepSpeed:
      fork::read_deepspeed(fc, mm, out, log);
      break;
    case ForeignFormat::kDeepSpeedUniversal:
      fork::read_universal(fc, mm, out, log);
      break;
    case ForeignFormat::kMegatron:
      fork::read_megatron(fc, mm, out, log);
      break;
  }
  return out;
}

}  // namespace megaton::checkpoint
