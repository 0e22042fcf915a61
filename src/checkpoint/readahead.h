// Read-ahead for a checkpoint load: while a tensor is checksummed and copied to its device, the kernel already reads
// the next tensor's bytes from the disk into the page cache (posix_fadvise WILLNEED on the dataset's contiguous
// bytes), so the disk does not wait for the CPU between reads. Best effort: a file or dataset it cannot place (not
// contiguous, another driver) is read without it.
#pragma once
#include <hdf5.h>

#include <string>

namespace megaton::checkpoint {

class Readahead {
 public:
  /// `path`: the HDF5 file `file` was opened from.
  Readahead(hid_t file, const std::string& path);
  ~Readahead();
  Readahead(const Readahead&) = delete;
  Readahead& operator=(const Readahead&) = delete;

  /// Starts reading dataset `dataset_path`'s stored bytes into the page cache; returns at once.
  void prefetch(const std::string& dataset_path) const;

 private:
  hid_t file_;
  int fd_ = -1;
};

}  // namespace megaton::checkpoint
