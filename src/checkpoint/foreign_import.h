// Megatron-DeepSpeed checkpoints as megaton checkpoints: `megaton convert` writes one; `--load` of a foreign
// directory converts it once into DIR/megaton_import (reused while its iteration matches) and loads that.
#pragma once
#include <string>

#include "checkpoint/fork_checkpoint.h"

namespace megaton::checkpoint {

/// The directory --load converts into.
inline constexpr const char* kImportDir = "megaton_import";

/// Reads `fc` and writes it as a megaton checkpoint under `save_dir` (published, trackers updated; `keep_last` > 0
/// prunes older iterations there). Serial.
std::string import_foreign_checkpoint(const ForeignCheckpoint& fc, const std::string& save_dir, const Logger& log,
                                      int keep_last = 0);

/// For --load: `load` itself when it is not a foreign checkpoint; else <load>/megaton_import, converted now unless
/// it already holds the foreign checkpoint's iteration (an older conversion there is removed). Serial (call it from
/// one process).
std::string megaton_load_dir(const std::string& load, const Logger& log);

}  // namespace megaton::checkpoint
