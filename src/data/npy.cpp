#include "data/npy.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <regex>

#include "core/error.h"
#include "core/safe_file.h"

namespace megaton::data {

namespace {
size_t descr_size(const std::string& d) {
  if (d == "<i4" || d == "<u4" || d == "<f4") return 4;
  if (d == "<i8" || d == "<u8" || d == "<f8") return 8;
  if (d == "<i2" || d == "<u2") return 2;
  if (d == "|u1" || d == "|i1") return 1;
  return 0;
}
}  // namespace

void write_npy(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape, const void* data,
               size_t itemsize) {
  MEGATON_ASSERT(descr_size(descr) == itemsize, "npy descr ", descr, " vs itemsize ", itemsize);
  std::string sh = "(";
  int64_t n = 1;
  for (size_t k = 0; k < shape.size(); ++k) {
    sh += std::to_string(shape[k]) + (shape.size() == 1 ? "," : (k + 1 < shape.size() ? ", " : ""));
    n *= shape[k];
  }
  sh += ")";
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + sh + ", }";
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  refuse_symlink(path, "index cache");
  std::FILE* f = open_exclusive_file(tmp, "index cache (set --data-cache-path to a writable directory)");
  const uint16_t hlen = static_cast<uint16_t>(header.size());
  bool ok = std::fwrite("\x93NUMPY\x01\x00", 1, 8, f) == 8 && std::fwrite(&hlen, 2, 1, f) == 1 &&
            std::fwrite(header.data(), 1, header.size(), f) == header.size();
  const size_t bytes = static_cast<size_t>(n) * itemsize;
  ok = ok && (bytes == 0 || std::fwrite(data, 1, bytes, f) == bytes) && std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  std::fclose(f);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw RuntimeError(str("writing '", path, "' failed: ", std::strerror(errno)));
  }
}

NpyArray::NpyArray(const std::string& path) : file_(path) {
  const uint8_t* p = file_.data();
  MEGATON_CHECK(file_.size() >= 10 && std::memcmp(p, "\x93NUMPY", 6) == 0, DataError, path, ": not a .npy file");
  const int major = p[6];
  size_t hlen = 0, hstart = 0;
  if (major == 1) {
    hlen = p[8] | (size_t(p[9]) << 8), hstart = 10;
  } else {
    MEGATON_CHECK(file_.size() >= 12, DataError, path, ": truncated .npy header");
    hlen = p[8] | (size_t(p[9]) << 8) | (size_t(p[10]) << 16) | (size_t(p[11]) << 24), hstart = 12;
  }
  MEGATON_CHECK(hstart + hlen <= file_.size(), DataError, path, ": truncated .npy header");
  const std::string header(reinterpret_cast<const char*>(p + hstart), hlen);
  std::smatch m;
  MEGATON_CHECK(std::regex_search(header, m, std::regex(R"('descr'\s*:\s*'([^']+)')")), DataError, path,
                ": .npy header has no descr: ", header);
  descr_ = m[1];
  MEGATON_CHECK(descr_size(descr_) > 0, DataError, path, ": unsupported .npy dtype ", descr_);
  MEGATON_CHECK(std::regex_search(header, std::regex(R"('fortran_order'\s*:\s*False)")), DataError, path,
                ": Fortran-order .npy arrays are not supported");
  MEGATON_CHECK(std::regex_search(header, m, std::regex(R"('shape'\s*:\s*\(([0-9,\s]*)\))")), DataError, path,
                ": .npy header has no shape: ", header);
  const std::string dims = m[1];
  const std::regex number("[0-9]+");
  for (std::sregex_iterator it(dims.begin(), dims.end(), number), end; it != end; ++it)
    shape_.push_back(std::stoll(it->str()));
  offset_ = hstart + hlen;
  MEGATON_CHECK(file_.size() == offset_ + static_cast<size_t>(numel()) * descr_size(descr_), DataError, path, ": ",
                file_.size(), " bytes, expected ", offset_ + numel() * descr_size(descr_), " for shape ", dims, " of ",
                descr_, " (truncated?)");
}

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

}  // namespace megaton::data
