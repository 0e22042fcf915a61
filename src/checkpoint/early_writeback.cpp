#include "checkpoint/early_writeback.h"

#include <fcntl.h>
#include <unistd.h>

namespace megaton::checkpoint {

EarlyWriteback::EarlyWriteback(const std::string& path, int64_t every_bytes) : every_(every_bytes) {
#if defined(__linux__)
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);  // a hint only: a file that cannot be opened gets none
#endif
}

EarlyWriteback::~EarlyWriteback() {
  if (fd_ >= 0) ::close(fd_);
}

void EarlyWriteback::wrote(int64_t bytes) {
  pending_ += bytes;
  if (fd_ < 0 || pending_ < every_) return;
  pending_ = 0;
#if defined(__linux__)
  // The whole file: dirty pages of other ranks' slabs count too, and pages already under write-back are skipped.
  if (::sync_file_range(fd_, 0, 0, SYNC_FILE_RANGE_WRITE) != 0) {
    ::close(fd_);  // unsupported here (EINVAL, ESPIPE): stop asking
    fd_ = -1;
  }
#endif
}

}  // namespace megaton::checkpoint
