// `rm -rf PATH` without std::filesystem::remove_all. The PyTorch wheels' libtorch.so exports its own copy of
// remove_all(const path&), which the dynamic linker can bind megaton's calls to; that copy segfaulted on a non-empty
// directory on a GPU node (docs/gpu.md, troubleshooting), and linking libstdc++ first does not help. This is plain
// POSIX.
#pragma once
#include <string>

namespace megaton {

/// Removes `path` and, for a directory, everything under it; symbolic links are removed, never followed. A path that
/// does not exist is success. On failure returns false and, when `error` is given, says which path and why.
bool remove_tree(const std::string& path, std::string* error = nullptr);

}  // namespace megaton
