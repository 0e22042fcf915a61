#include "checkpoint/readahead.h"

#include <fcntl.h>
#include <unistd.h>

#include "checkpoint/h5.h"

namespace megaton::checkpoint {

Readahead::Readahead(hid_t file, const std::string& path) : file_(file), fd_(::open(path.c_str(), O_RDONLY)) {}

Readahead::~Readahead() {
  if (fd_ >= 0) ::close(fd_);
}

void Readahead::prefetch(const std::string& dataset_path) const {
  if (fd_ < 0) return;
  const hid_t ds = H5Dopen2(file_, dataset_path.c_str(), H5P_DEFAULT);
  if (ds < 0) {
    H5Eclear2(H5E_DEFAULT);
    return;
  }
  const haddr_t offset = H5Dget_offset(ds);  // HADDR_UNDEF unless contiguous and allocated
  const hsize_t bytes = H5Dget_storage_size(ds);
  H5Dclose(ds);
  H5Eclear2(H5E_DEFAULT);
  if (offset == HADDR_UNDEF || bytes == 0) return;
  (void)::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(bytes), POSIX_FADV_WILLNEED);
}

}  // namespace megaton::checkpoint
