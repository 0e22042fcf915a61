// Megatron's MMapIndexedDataset (.bin/.idx), byte-compatible both ways (reference inventory §3.1-3.2):
//   P.idx  "MMIDIDX\0\0" | u64 version=1 | u8 dtype code | u64 N items | u64 D = len(doc_idx)
//          | i32 sizes[N] | i64 pointers[N] (byte offsets into P.bin) | i64 doc_idx[D] (doc_idx[0]=0, last=N)
//   P.bin  the tokens of every item, concatenated, in the dtype (no header)
// The reader memory-maps both files read-only and checks every structural invariant on open, naming the file and
// what was expected. The builder writes P.bin.tmp / P.idx.tmp and renames them only in finalize() (old P.idx first
// removed, P.bin renamed before P.idx), so an interrupted run never leaves a pair that looks complete.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace megaton::data {

/// dtype codes of indexed_dataset.dtypes.
enum DTypeCode : uint8_t {
  kUInt8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat64Legacy = 6,
  kFloat64 = 7,
  kUInt16 = 8
};
/// Bytes per element; throws DataError for an unknown code.
size_t dtype_itemsize(uint8_t code);
const char* dtype_name(uint8_t code);

/// A read-only memory map of a whole file (RAII).
class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

class MMapIndexedDataset {
 public:
  /// Opens prefix.idx and prefix.bin; DataError when missing, truncated or inconsistent.
  explicit MMapIndexedDataset(const std::string& prefix);

  const std::string& prefix() const { return prefix_; }
  uint8_t dtype() const { return dtype_; }
  size_t itemsize() const { return itemsize_; }
  /// Number of items (sequences) N.
  size_t size() const { return n_; }
  /// Token count of item i (the idx arrays are unaligned in the file: read with memcpy).
  int32_t item_size(size_t i) const { return load<int32_t>(sizes_ + 4 * i); }
  int64_t pointer(size_t i) const { return load<int64_t>(pointers_ + 8 * i); }
  size_t doc_idx_size() const { return d_; }
  int64_t doc_idx(size_t k) const { return load<int64_t>(doc_idx_ + 8 * k); }
  std::vector<int32_t> sizes() const;
  /// Reads one byte of every page of the .idx and .bin mappings, so the first iterations do not wait on the file
  /// system (Megatron's --mmap-warmup). Returns the bytes touched.
  size_t warm_up() const;
  std::vector<int64_t> doc_idx_vector() const;
  /// Total tokens in the dataset.
  int64_t num_tokens() const { return total_tokens_; }

  /// Tokens [offset, offset+length) of item i, widened to int64, written to out (Megatron's `ds.get(i, offset,
  /// length)`).
  void get(size_t i, size_t offset, size_t length, int64_t* out) const;
  std::vector<int64_t> get(size_t i) const;
  const uint8_t* bin_data() const { return bin_.data(); }
  size_t bin_bytes() const { return bin_.size(); }

 private:
  template <typename T>
  static T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  }
  std::string prefix_;
  MappedFile idx_, bin_;
  uint8_t dtype_ = 0;
  size_t itemsize_ = 0;
  size_t n_ = 0, d_ = 0;
  const uint8_t* sizes_ = nullptr;
  const uint8_t* pointers_ = nullptr;
  const uint8_t* doc_idx_ = nullptr;
  int64_t total_tokens_ = 0;
};

class IndexedDatasetBuilder {
 public:
  IndexedDatasetBuilder(const std::string& prefix, uint8_t dtype);
  ~IndexedDatasetBuilder();  // removes the temporary files unless finalize() succeeded
  IndexedDatasetBuilder(const IndexedDatasetBuilder&) = delete;
  IndexedDatasetBuilder& operator=(const IndexedDatasetBuilder&) = delete;

  /// Appends one item; DataError when a token does not fit the dtype.
  void add_item(const int32_t* tokens, size_t n);
  void end_document();
  /// Appends a whole existing dataset (merge_file_): its items, documents and bytes. Its dtype must match.
  void merge_file(const std::string& other_prefix);
  /// Writes the index and atomically publishes prefix.bin and prefix.idx.
  void finalize();

  size_t num_items() const { return sizes_.size(); }
  size_t num_documents() const { return doc_idx_.size() - 1; }
  int64_t num_tokens() const { return tokens_; }

 private:
  void write_bin(const void* p, size_t bytes);
  std::string prefix_, bin_tmp_, idx_tmp_;
  uint8_t dtype_;
  size_t itemsize_;
  std::FILE* bin_ = nullptr;
  std::vector<int32_t> sizes_;
  std::vector<int64_t> doc_idx_{0};
  std::vector<char> convert_;
  int64_t tokens_ = 0;
  bool finalized_ = false;
};

/// prefix.bin / prefix.idx exist.
bool indexed_dataset_exists(const std::string& prefix);

}  // namespace megaton::data
