// Read-ahead for a checkpoint load: while the loader checksums a tensor and copies it to its device, a background
// thread has the kernel read the next tensors' bytes from the disk into the page cache, up to a window ahead of the
// loader, so the disk does not wait for the CPU between reads (nor the CPU for the disk, once the window is full).
// The thread only asks the kernel (posix_fadvise WILLNEED, in chunks no larger than Linux's smallest per-call
// read-ahead limit, which a single large request would be cut to); it makes no HDF5 call, so the loader's HDF5 use
// stays single-threaded. Best effort: a dataset it cannot place (not contiguous, not yet allocated) is read without
// it.
#pragma once
#include <hdf5.h>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace megaton::checkpoint {

/// Bytes [begin, end) of a file.
struct ByteRange {
  int64_t begin = 0, end = 0;
};

/// The file bytes spanning the hyperslab [offset, offset + count) (row-major, element_size bytes an element) of
/// contiguous dataset `dataset_path` in `file`; nullopt where the dataset's storage is not one contiguous block or
/// the hyperslab is empty.
std::optional<ByteRange> dataset_span(hid_t file, const std::string& dataset_path, const std::vector<int64_t>& offset,
                                      const std::vector<int64_t>& count, int64_t element_size);

class Readahead {
 public:
  /// Chunk of each request to the kernel: Linux cuts a WILLNEED request to the device's read-ahead size, 128 KiB by
  /// default.
  static constexpr int64_t kChunk = 128 << 10;

  /// Reads `ranges` of file `path` ahead, in order, never more than `window` bytes past the start of the range the
  /// loader last reached (reached()). Starts its thread at once; a file it cannot open reads nothing ahead.
  Readahead(const std::string& path, std::vector<ByteRange> ranges, int64_t window);
  /// Stops the thread (between two chunks) and joins it.
  ~Readahead();
  Readahead(const Readahead&) = delete;
  Readahead& operator=(const Readahead&) = delete;

  /// The loader is about to read ranges[i]: the thread may run up to `window` bytes past its start.
  void reached(size_t i);
  /// Bytes handed to the kernel so far (tests).
  int64_t requested_bytes() const;

 private:
  void run();

  int fd_ = -1;
  std::vector<ByteRange> ranges_;
  std::vector<int64_t> before_;  // before_[i]: the bytes of ranges_[0, i)
  int64_t window_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  size_t reached_ = 0;     // guarded by mu_
  bool stop_ = false;      // guarded by mu_
  int64_t requested_ = 0;  // guarded by mu_
  std::thread thread_;
};

}  // namespace megaton::checkpoint
