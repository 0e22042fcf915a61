// From what the user typed after --load (or as `megaton inspect DIR`) to the checkpoint file to open.
#pragma once
#include <string>

namespace megaton::checkpoint {

/// A checkpoint file from what the user typed: the .h5 file itself, an iter_NNNNNNN/ (or release/) directory, or a
/// --save directory (its tracker's iteration). A Megatron-DeepSpeed checkpoint directory is converted first, once
/// (foreign_import.h), and its conversion's file returned. Throws CheckpointError naming the path otherwise.
std::string resolve_checkpoint_path(const std::string& arg);

}  // namespace megaton::checkpoint
