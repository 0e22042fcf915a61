#include "data/indexed_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <limits>

#include "core/error.h"
#include "core/safe_file.h"

namespace megaton::data {

namespace {
constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
constexpr size_t kHeader = 34;

template <typename T>
void put(std::vector<char>& buf, T v) {
  const char* p = reinterpret_cast<const char*>(&v);
  buf.insert(buf.end(), p, p + sizeof(T));
}
}  // namespace

size_t dtype_itemsize(uint8_t code) {
  switch (code) {
    case kUInt8:
    case kInt8:
      return 1;
    case kInt16:
    case kUInt16:
      return 2;
    case kInt32:
      return 4;
    case kInt64:
    case kFloat64Legacy:
    case kFloat64:
      return 8;
    default:
      throw DataError(str("unknown indexed-dataset dtype code ", int(code), " (expected 1..8)"));
  }
}

const char* dtype_name(uint8_t code) {
  static const char* names[] = {"?", "uint8", "int8", "int16", "int32", "int64", "float64", "float64", "uint16"};
  return code <= 8 ? names[code] : "?";
}

// ~~~ MappedFile ~~~

MappedFile::MappedFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  MEGATON_CHECK(fd >= 0, DataError, "cannot open '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw DataError(str("cannot stat '", path, "': ", std::strerror(errno)));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      throw DataError(str("cannot mmap '", path, "': ", std::strerror(errno)));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& o) noexcept : data_(o.data_), size_(o.size_) {
  o.data_ = nullptr, o.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
    data_ = o.data_, size_ = o.size_;
    o.data_ = nullptr, o.size_ = 0;
  }
  return *this;
}

// ~~~ MMapIndexedDataset ~~~

MMapIndexedDataset::MMapIndexedDataset(const std::string& prefix) : prefix_(prefix) {
  const std::string ip = prefix + ".idx", bp = prefix + ".bin";
  MEGATON_CHECK(std::filesystem::exists(ip), DataError, "dataset index '", ip,
                "' not found (--data-path takes the prefix ", "without .bin/.idx, e.g. my-corpus_text_document)");
  MEGATON_CHECK(std::filesystem::exists(bp), DataError, "dataset payload '", bp, "' not found");
  idx_ = MappedFile(ip);
  bin_ = MappedFile(bp);
  const uint8_t* p = idx_.data();
  MEGATON_CHECK(idx_.size() >= kHeader, DataError, ip, ": ", idx_.size(), " bytes, shorter than the 34-byte header");
  MEGATON_CHECK(
      std::memcmp(p, kMagic, 9) == 0, DataError, ip,
      ": bad magic; expected MMIDIDX\\x00\\x00 (Megatron --data-impl mmap)",
      std::memcmp(p, "TNTIDX", 6) == 0 ? "; this is the legacy lazy/cached format, which is not supported" : "");
  const auto version = load<uint64_t>(p + 9);
  MEGATON_CHECK(version == 1, DataError, ip, ": version ", version, ", expected 1");
  dtype_ = p[17];
  MEGATON_CHECK(dtype_ >= 1 && dtype_ <= 8, DataError, ip, ": unknown dtype code ", int(dtype_), " (expected 1..8)");
  itemsize_ = dtype_itemsize(dtype_);
  n_ = load<uint64_t>(p + 18);
  d_ = load<uint64_t>(p + 26);
  const uint64_t expect = kHeader + 12ull * n_ + 8ull * d_;
  MEGATON_CHECK(n_ < (1ull << 40) && d_ < (1ull << 40) && idx_.size() == expect, DataError, ip, ": ", idx_.size(),
                " bytes, expected 34 + 12*N + 8*D = ", expect, " for N=", n_, " items and D=", d_, " doc_idx entries");
  sizes_ = p + kHeader;
  pointers_ = sizes_ + 4 * n_;
  doc_idx_ = pointers_ + 8 * n_;
  MEGATON_CHECK(d_ >= 1 && doc_idx(0) == 0 && doc_idx(d_ - 1) == static_cast<int64_t>(n_), DataError, ip,
                ": doc_idx must start at 0 and end at N=", n_);
  int64_t expect_ptr = 0;
  for (size_t i = 0; i < n_; ++i) {
    const int32_t s = item_size(i);
    MEGATON_CHECK(s >= 0 && pointer(i) == expect_ptr, DataError, ip, ": item ", i, " has size ", s, " and pointer ",
                  pointer(i), "; expected pointer ", expect_ptr, " (the byte prefix sum of sizes)");
    expect_ptr += static_cast<int64_t>(s) * static_cast<int64_t>(itemsize_);
    total_tokens_ += s;
  }
  MEGATON_CHECK(static_cast<int64_t>(bin_.size()) == expect_ptr, DataError, bp, ": ", bin_.size(), " bytes, but ", ip,
                " describes ", total_tokens_, " tokens of ", dtype_name(dtype_), " = ", expect_ptr,
                " bytes (mismatched or truncated pair)");
  for (size_t k = 1; k < d_; ++k)
    MEGATON_CHECK(doc_idx(k) >= doc_idx(k - 1), DataError, ip, ": doc_idx is not non-decreasing at entry ", k);
}

size_t MMapIndexedDataset::warm_up() const {
  constexpr size_t kPage = 4096;
  volatile uint8_t sink = 0;  // the reads must happen
  for (const MappedFile* f : {&idx_, &bin_}) {
    for (size_t i = 0; i < f->size(); i += kPage) sink = sink + f->data()[i];
  }
  return idx_.size() + bin_.size();
}

std::vector<int32_t> MMapIndexedDataset::sizes() const {
  std::vector<int32_t> v(n_);
  if (n_) std::memcpy(v.data(), sizes_, 4 * n_);
  return v;
}

std::vector<int64_t> MMapIndexedDataset::doc_idx_vector() const {
  std::vector<int64_t> v(d_);
  std::memcpy(v.data(), doc_idx_, 8 * d_);
  return v;
}

void MMapIndexedDataset::get(size_t i, size_t offset, size_t length, int64_t* out) const {
  MEGATON_CHECK(i < n_ && offset + length <= static_cast<size_t>(item_size(i)), DataError, prefix_, ": get(", i, ", ",
                offset, ", ", length, ") is outside the item (", n_, " items)");
  const uint8_t* src = bin_.data() + pointer(i) + offset * itemsize_;
  switch (dtype_) {
    case kUInt16:
      for (size_t k = 0; k < length; ++k) out[k] = load<uint16_t>(src + 2 * k);
      break;
    case kInt32:
      for (size_t k = 0; k < length; ++k) out[k] = load<int32_t>(src + 4 * k);
      break;
    case kInt64:
      for (size_t k = 0; k < length; ++k) out[k] = load<int64_t>(src + 8 * k);
      break;
    case kUInt8:
      for (size_t k = 0; k < length; ++k) out[k] = src[k];
      break;
    case kInt8:
      for (size_t k = 0; k < length; ++k) out[k] = static_cast<int8_t>(src[k]);
      break;
    case kInt16:
      for (size_t k = 0; k < length; ++k) out[k] = load<int16_t>(src + 2 * k);
      break;
    default:
      throw DataError(str(prefix_, ": dtype ", dtype_name(dtype_), " does not hold token ids"));
  }
}

std::vector<int64_t> MMapIndexedDataset::get(size_t i) const {
  MEGATON_CHECK(i < n_, DataError, prefix_, ": item ", i, " out of range (", n_, " items)");
  std::vector<int64_t> v(static_cast<size_t>(item_size(i)));
  get(i, 0, v.size(), v.data());
  return v;
}

bool indexed_dataset_exists(const std::string& prefix) {
  return std::filesystem::exists(prefix + ".bin") && std::filesystem::exists(prefix + ".idx");
}

// ~~~ IndexedDatasetBuilder ~~~

IndexedDatasetBuilder::IndexedDatasetBuilder(const std::string& prefix, uint8_t dtype)
    : prefix_(prefix),
      bin_tmp_(prefix + ".bin.tmp"),
      idx_tmp_(prefix + ".idx.tmp"),
      dtype_(dtype),
      itemsize_(dtype_itemsize(dtype)) {
  MEGATON_CHECK(
      dtype == kUInt16 || dtype == kInt32 || dtype == kInt64 || dtype == kUInt8 || dtype == kInt16 || dtype == kInt8,
      UsageError, "indexed dataset dtype ", dtype_name(dtype), " cannot hold token ids");
  refuse_symlink(prefix + ".bin", "indexed dataset output");
  refuse_symlink(prefix + ".idx", "indexed dataset output");
  bin_ = open_exclusive_file(bin_tmp_, "indexed dataset output");
  std::setvbuf(bin_, nullptr, _IOFBF, 1 << 22);
}

IndexedDatasetBuilder::~IndexedDatasetBuilder() {
  if (bin_) std::fclose(bin_);
  if (!finalized_) {
    std::remove(bin_tmp_.c_str());
    std::remove(idx_tmp_.c_str());
  }
}

void IndexedDatasetBuilder::write_bin(const void* p, size_t bytes) {
  if (bytes && std::fwrite(p, 1, bytes, bin_) != bytes)
    throw RuntimeError(str("writing '", bin_tmp_, "' failed: ", std::strerror(errno)));
}

void IndexedDatasetBuilder::add_item(const int32_t* tokens, size_t n) {
  MEGATON_CHECK(n <= static_cast<size_t>(std::numeric_limits<int32_t>::max()), DataError, "an item of ", n,
                " tokens does not fit the int32 sizes array");
  convert_.resize(n * itemsize_);
  char* dst = convert_.data();
  int64_t lo = 0, hi = 0;
  switch (dtype_) {
    case kUInt16:
      lo = 0, hi = 65535;
      break;
    case kInt32:
      lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
      break;
    case kInt64:
      lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
      break;
    case kUInt8:
      lo = 0, hi = 255;
      break;
    case kInt8:
      lo = -128, hi = 127;
      break;
    case kInt16:
      lo = -32768, hi = 32767;
      break;
  }
  for (size_t k = 0; k < n; ++k) {
    const int64_t t = tokens[k];
    MEGATON_CHECK(t >= lo && t <= hi, DataError, "token id ", t, " does not fit dtype ", dtype_name(dtype_), " of '",
                  prefix_, "'");
    switch (dtype_) {
      case kUInt16: {
        const auto v = static_cast<uint16_t>(t);
        std::memcpy(dst + 2 * k, &v, 2);
        break;
      }
      case kInt32: {
        const auto v = static_cast<int32_t>(t);
        std::memcpy(dst + 4 * k, &v, 4);
        break;
      }
      case kInt64: {
        std::memcpy(dst + 8 * k, &t, 8);
        break;
      }
      case kUInt8:
      case kInt8:
        dst[k] = static_cast<char>(t);
        break;
      case kInt16: {
        const auto v = static_cast<int16_t>(t);
        std::memcpy(dst + 2 * k, &v, 2);
        break;
      }
    }
  }
  write_bin(dst, n * itemsize_);
  sizes_.push_back(static_cast<int32_t>(n));
  tokens_ += static_cast<int64_t>(n);
}

void IndexedDatasetBuilder::end_document() {
  doc_idx_.push_back(static_cast<int64_t>(sizes_.size()));
}

void IndexedDatasetBuilder::merge_file(const std::string& other_prefix) {
  const MMapIndexedDataset other(other_prefix);
  MEGATON_CHECK(other.dtype() == dtype_, DataError, "cannot merge '", other_prefix, "' (dtype ",
                dtype_name(other.dtype()), ") into '", prefix_, "' (dtype ", dtype_name(dtype_),
                "): all datasets must have the same dtype (re-run preprocess with the same tokenizer)");
  const auto offset = static_cast<int64_t>(sizes_.size());
  for (size_t i = 0; i < other.size(); ++i) sizes_.push_back(other.item_size(i));
  for (size_t k = 1; k < other.doc_idx_size(); ++k) doc_idx_.push_back(other.doc_idx(k) + offset);
  constexpr size_t kChunk = 1 << 24;
  for (size_t off = 0; off < other.bin_bytes(); off += kChunk)
    write_bin(other.bin_data() + off, std::min(kChunk, other.bin_bytes() - off));
  tokens_ += other.num_tokens();
}

void IndexedDatasetBuilder::finalize() {
  MEGATON_ASSERT(!finalized_, "finalize() called twice");
  if (std::fflush(bin_) != 0 || ::fsync(fileno(bin_)) != 0)
    throw RuntimeError(str("flushing '", bin_tmp_, "' failed: ", std::strerror(errno)));
  std::fclose(bin_);
  bin_ = nullptr;
  std::vector<char> buf;
  buf.reserve(kHeader + 12 * sizes_.size() + 8 * doc_idx_.size());
  buf.insert(buf.end(), kMagic, kMagic + 9);
  put<uint64_t>(buf, 1);
  put<uint8_t>(buf, dtype_);
  put<uint64_t>(buf, sizes_.size());
  put<uint64_t>(buf, doc_idx_.size());
  const char* sp = reinterpret_cast<const char*>(sizes_.data());
  buf.insert(buf.end(), sp, sp + 4 * sizes_.size());
  int64_t ptr = 0;
  for (int32_t s : sizes_) {
    put<int64_t>(buf, ptr);
    ptr += static_cast<int64_t>(s) * static_cast<int64_t>(itemsize_);
  }
  const char* dp = reinterpret_cast<const char*>(doc_idx_.data());
  buf.insert(buf.end(), dp, dp + 8 * doc_idx_.size());
  std::FILE* idx = open_exclusive_file(idx_tmp_, "indexed dataset output");
  const bool ok =
      std::fwrite(buf.data(), 1, buf.size(), idx) == buf.size() && std::fflush(idx) == 0 && ::fsync(fileno(idx)) == 0;
  std::fclose(idx);
  MEGATON_CHECK(ok, RuntimeError, "writing '", idx_tmp_, "' failed: ", std::strerror(errno));
  // Publish: drop any old index first, so that no moment shows a new .bin next to a stale .idx.
  const std::string idx_final = prefix_ + ".idx", bin_final = prefix_ + ".bin";
  std::remove(idx_final.c_str());
  MEGATON_CHECK(std::rename(bin_tmp_.c_str(), bin_final.c_str()) == 0, RuntimeError, "cannot rename '", bin_tmp_,
                "' to '", bin_final, "': ", std::strerror(errno));
  MEGATON_CHECK(std::rename(idx_tmp_.c_str(), idx_final.c_str()) == 0, RuntimeError, "cannot rename '", idx_tmp_,
                "' to '", idx_final, "': ", std::strerror(errno));
  finalized_ = true;
}

}  // namespace megaton::data
