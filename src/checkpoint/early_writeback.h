// Starts the kernel's write-back of a file being written while it is written, so the final fsync finds little left
// to flush and the disk works while the CPU still prepares the next tensors (CRCs, device-to-host copies). Without
// it a checkpoint smaller than the page cache's dirty limit is written to memory first and then to the disk, one
// after the other. Linux's sync_file_range(SYNC_FILE_RANGE_WRITE); elsewhere, or where the file system refuses it,
// nothing happens (the fsync at the end is what makes the data durable either way).
#pragma once
#include <cstdint>
#include <string>

namespace megaton::checkpoint {

class EarlyWriteback {
 public:
  /// Opens `path` (already created) for the hints; `every_bytes` of this rank's writes between two of them.
  EarlyWriteback(const std::string& path, int64_t every_bytes = int64_t{256} << 20);
  ~EarlyWriteback();
  EarlyWriteback(const EarlyWriteback&) = delete;
  EarlyWriteback& operator=(const EarlyWriteback&) = delete;

  /// Counts `bytes` just written; past the interval, asks the kernel to start writing the file's dirty pages back
  /// (asynchronously: it does not wait for the disk).
  void wrote(int64_t bytes);

 private:
  int fd_ = -1;
  int64_t every_ = 0, pending_ = 0;
};

}  // namespace megaton::checkpoint
