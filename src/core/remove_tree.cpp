#include "core/remove_tree.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace megaton {

namespace {

bool fail(const std::string& path, const char* what, std::string* error) {
  if (error) *error = path + ": cannot " + what + ": " + std::strerror(errno);
  return false;
}

}  // namespace

bool remove_tree(const std::string& path, std::string* error) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT ? true : fail(path, "stat", error);
  if (!S_ISDIR(st.st_mode)) return ::unlink(path.c_str()) == 0 || errno == ENOENT || fail(path, "unlink", error);
  std::vector<std::string> names;
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return fail(path, "open directory", error);
  while (const dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(dir);
  for (const std::string& name : names)
    if (!remove_tree(path + "/" + name, error)) return false;
  return ::rmdir(path.c_str()) == 0 || errno == ENOENT || fail(path, "remove directory", error);
}

}  // namespace megaton
