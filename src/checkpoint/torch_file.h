// torch's `.pt` files without Python: a zip archive (LibTorch's PyTorchStreamReader/Writer) of `data.pkl` plus one
// record per storage, `data/<key>`. Reading goes through the restricted unpickler (unpickler.h); writing through
// pickler.h, so that torch.load in Python reads what megaton writes.
#pragma once
#include <string>

#include "checkpoint/py_value.h"

namespace megaton::checkpoint {

/// Reads a torch.save file. CheckpointError naming `path` for a missing, truncated or foreign file, torch's legacy
/// (pre-1.6, non-zip) format, or a pickle that refers to classes megaton does not read.
Py load_torch_file(const std::string& path);

/// Writes `v` as torch.save does (the zip format), atomically: a temporary file beside `path`, fsync, rename.
void save_torch_file(const std::string& path, const Py& v);

}  // namespace megaton::checkpoint
