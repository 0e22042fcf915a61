#include "checkpoint/readahead.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

namespace megaton::checkpoint {

std::optional<ByteRange> dataset_span(hid_t file, const std::string& dataset_path, const std::vector<int64_t>& offset,
                                      const std::vector<int64_t>& count, int64_t element_size) {
  for (int64_t c : count)
    if (c <= 0) return std::nullopt;
  const hid_t ds = H5Dopen2(file, dataset_path.c_str(), H5P_DEFAULT);
  if (ds < 0) {
    H5Eclear2(H5E_DEFAULT);
    return std::nullopt;
  }
  const haddr_t base = H5Dget_offset(ds);  // HADDR_UNDEF unless contiguous and allocated
  const hid_t space = H5Dget_space(ds);
  std::vector<hsize_t> dims(space >= 0 ? std::max(H5Sget_simple_extent_ndims(space), 0) : 0);
  if (space >= 0) {
    if (!dims.empty()) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
    H5Sclose(space);
  }
  H5Dclose(ds);
  H5Eclear2(H5E_DEFAULT);
  if (base == HADDR_UNDEF || dims.size() != offset.size() || offset.size() != count.size()) return std::nullopt;
  // Row-major linear index of the hyperslab's first and last elements.
  int64_t first = 0, last = 0;
  for (size_t d = 0; d < dims.size(); ++d) {
    first = first * static_cast<int64_t>(dims[d]) + offset[d];
    last = last * static_cast<int64_t>(dims[d]) + offset[d] + count[d] - 1;
  }
  const auto b = static_cast<int64_t>(base);
  return ByteRange{b + first * element_size, b + (last + 1) * element_size};
}

Readahead::Readahead(const std::string& path, std::vector<ByteRange> ranges, int64_t window)
    : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)), ranges_(std::move(ranges)), window_(window) {
  before_.reserve(ranges_.size() + 1);
  before_.push_back(0);
  for (const ByteRange& r : ranges_) before_.push_back(before_.back() + (r.end - r.begin));
  if (fd_ >= 0 && !ranges_.empty()) thread_ = std::thread([this] { run(); });
}

Readahead::~Readahead() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) ::close(fd_);
}

void Readahead::reached(size_t i) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    reached_ = std::max(reached_, std::min(i, ranges_.size()));
  }
  cv_.notify_all();
}

int64_t Readahead::requested_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requested_;
}

void Readahead::run() {
  // Position: ranges_[i], `at` bytes into it; `done` bytes of all ranges requested before it.
  size_t i = 0;
  int64_t at = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (i < ranges_.size()) {
    const int64_t done = before_[i] + at;
    cv_.wait(lock, [&] { return stop_ || done < before_[reached_] + window_; });
    if (stop_) return;
    const ByteRange& r = ranges_[i];
    const int64_t n = std::min({kChunk, r.end - r.begin - at, before_[reached_] + window_ - done});
    lock.unlock();
    (void)::posix_fadvise(fd_, static_cast<off_t>(r.begin + at), static_cast<off_t>(n), POSIX_FADV_WILLNEED);
    lock.lock();
    requested_ += n;
    at += n;
    if (at >= r.end - r.begin) ++i, at = 0;
  }
}

}  // namespace megaton::checkpoint
