#include "core/safe_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace megaton {

int create_exclusive(const std::string& path, const std::string& what) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    throw RuntimeError(str(what, ": cannot remove the stale '", path, "': ", std::strerror(errno)));
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    throw RuntimeError(str(what, ": cannot create '", path, "': ", std::strerror(errno),
                           errno == EEXIST || errno == ELOOP ? " (something else created it meanwhile)" : ""));
  return fd;
}

std::FILE* open_exclusive_file(const std::string& path, const std::string& what) {
  const int fd = create_exclusive(path, what);
  std::FILE* f = ::fdopen(fd, "wb");
  if (!f) {
    const int err = errno;
    ::close(fd);
    throw RuntimeError(str(what, ": cannot open '", path, "': ", std::strerror(err)));
  }
  return f;
}

void refuse_symlink(const std::string& path, const std::string& what) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
    throw RuntimeError(str(what, ": '", path, "' is a symbolic link; megaton does not replace a link (remove it, or ",
                           "write elsewhere)"));
}

bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

}  // namespace megaton
