#include "checkpoint/load_path.h"

#include <filesystem>

#include "checkpoint/foreign_import.h"
#include "checkpoint/fork_checkpoint.h"
#include "checkpoint/format.h"
#include "checkpoint/tracker.h"
#include "core/error.h"
#include "core/log.h"

namespace fs = std::filesystem;

namespace megaton::checkpoint {

std::string resolve_checkpoint_path(const std::string& arg) {
  const fs::path p(arg);
  if (fs::is_regular_file(p)) return p.string();
  if (!fs::is_directory(p)) throw CheckpointError(str(arg, ": no such checkpoint file or directory"));
  if (fs::is_regular_file(p / kFileName)) return (p / kFileName).string();
  if (detect_foreign_checkpoint(arg)) return resolve_checkpoint_path(megaton_load_dir(arg, Logger()));
  const auto it = read_latest_iteration(arg);
  if (!it)
    throw CheckpointError(str(arg, ": not a checkpoint (no ", kFileName, ", no '", kTrackerFile, "' tracker file)"));
  const fs::path f = p / iteration_dir_name(*it) / kFileName;
  if (!fs::is_regular_file(f))
    throw CheckpointError(str(arg, ": the tracker names iteration ", *it, " but ", f.string(), " does not exist"));
  return f.string();
}

}  // namespace megaton::checkpoint
