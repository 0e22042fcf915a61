// Creating output files safely where others can write: a temporary is created exclusively and never through a
// symbolic link (O_CREAT | O_EXCL | O_NOFOLLOW), so a link planted at a temporary's name cannot redirect a write to
// its target; an output path that is itself a symbolic link is refused.
//
//   std::FILE* f = open_exclusive_file(prefix + ".bin.tmp", "preprocess output");
#pragma once
#include <cstdio>
#include <string>

namespace megaton {

/// Removes whatever is at `path` (a stale temporary: unlink removes a link itself, never its target), then creates
/// it with O_CREAT | O_EXCL | O_NOFOLLOW, mode 0644. Returns the descriptor; RuntimeError naming the path and `what`.
int create_exclusive(const std::string& path, const std::string& what);
/// create_exclusive wrapped in a stdio stream ("wb").
std::FILE* open_exclusive_file(const std::string& path, const std::string& what);
/// RuntimeError when `path` exists and is a symbolic link (an output megaton would replace).
void refuse_symlink(const std::string& path, const std::string& what);
/// Whether `name` is a plain file name: not empty, no '/', not "." or "..", no NUL: a name read from a file (an HF
/// index's shard names) that must stay inside its directory.
bool is_plain_file_name(const std::string& name);

}  // namespace megaton
