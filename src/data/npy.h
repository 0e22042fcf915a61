// NumPy .npy files (format 1.0, C order, little-endian): Megatron caches its GPT sample indices in this format
// (doc_idx int32, sample_idx int32 [S+1,2], shuffle_idx uint32|int64). Written to a temporary name and renamed, so a
// reader never sees a partial file; read back memory-mapped.
// Written here: no Debian package reads or writes .npy from C++ (cnpy and libnpy are not packaged), and the format
// is a magic string, a length and a one-line Python dict (descr, fortran_order, shape) read with std::regex;
// tests/data/fork_sample_order_test.sh checks the files against NumPy's own reader.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/indexed_dataset.h"

namespace megaton::data {

/// Writes `data` (shape `shape`, numpy descr like "<i4", "<u4", "<i8") to `path` atomically.
void write_npy(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape, const void* data,
               size_t itemsize);

/// A memory-mapped .npy array.
class NpyArray {
 public:
  /// DataError naming the file when it is not a C-order .npy with a supported descr.
  explicit NpyArray(const std::string& path);
  const std::string& descr() const { return descr_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t numel() const;
  const void* data() const { return file_.data() + offset_; }

 private:
  MappedFile file_;
  std::string descr_;
  std::vector<int64_t> shape_;
  size_t offset_ = 0;
};

}  // namespace megaton::data
