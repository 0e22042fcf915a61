#include "data/input_stream.h"

#include <lzma.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace megaton::data {

namespace {

class FileStream : public InputStream {
 public:
  explicit FileStream(std::FILE* f) : f_(f) {}
  ~FileStream() override { std::fclose(f_); }
  size_t read(char* buf, size_t n) override {
    const size_t got = std::fread(buf, 1, n, f_);
    if (got == 0 && std::ferror(f_)) throw DataError(str("reading '", path_, "' failed: ", std::strerror(errno)));
    pos_ += got;
    return got;
  }
  uint64_t file_position() const override { return pos_; }

 private:
  std::FILE* f_;
  uint64_t pos_ = 0;
};

class GzipStream : public InputStream {
 public:
  explicit GzipStream(std::FILE* f) : f_(f), in_(1 << 20) {
    std::memset(&z_, 0, sizeof(z_));
    MEGATON_CHECK(inflateInit2(&z_, 15 + 32) == Z_OK, RuntimeError, "zlib inflateInit failed");
  }
  ~GzipStream() override {
    inflateEnd(&z_);
    std::fclose(f_);
  }
  size_t read(char* buf, size_t n) override {
    z_.next_out = reinterpret_cast<Bytef*>(buf);
    z_.avail_out = static_cast<uInt>(n);
    while (z_.avail_out == n && !done_) {
      if (z_.avail_in == 0) {
        const size_t got = std::fread(in_.data(), 1, in_.size(), f_);
        pos_ += got;
        if (got == 0) {
          MEGATON_CHECK(!std::ferror(f_), DataError, "reading '", path_, "' failed: ", std::strerror(errno));
          throw DataError(str(path_, ": truncated gzip stream (ends after ", pos_, " bytes)"));
        }
        z_.next_in = reinterpret_cast<Bytef*>(in_.data());
        z_.avail_in = static_cast<uInt>(got);
      }
      const int rc = inflate(&z_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        // Concatenated gzip members (as `cat a.gz b.gz`) continue; otherwise we are done.
        if (z_.avail_in == 0) {
          const int c = std::fgetc(f_);
          if (c == EOF) {
            done_ = true;
            break;
          }
          std::ungetc(c, f_);
        }
        inflateReset(&z_);
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        throw DataError(str(path_, ": corrupt gzip data near byte ", pos_, " (", z_.msg ? z_.msg : "zlib error", ")"));
      }
    }
    return n - z_.avail_out;
  }
  uint64_t file_position() const override { return pos_ - z_.avail_in; }

 private:
  std::FILE* f_;
  std::vector<char> in_;
  z_stream z_;
  uint64_t pos_ = 0;
  bool done_ = false;
};

class XzStream : public InputStream {
 public:
  explicit XzStream(std::FILE* f) : f_(f), in_(1 << 20) {
    MEGATON_CHECK(lzma_stream_decoder(&s_, UINT64_MAX, LZMA_CONCATENATED) == LZMA_OK, RuntimeError,
                  "liblzma decoder init failed");
  }
  ~XzStream() override {
    lzma_end(&s_);
    std::fclose(f_);
  }
  size_t read(char* buf, size_t n) override {
    s_.next_out = reinterpret_cast<uint8_t*>(buf);
    s_.avail_out = n;
    while (s_.avail_out == n && !done_) {
      lzma_action action = LZMA_RUN;
      if (s_.avail_in == 0) {
        const size_t got = std::fread(in_.data(), 1, in_.size(), f_);
        MEGATON_CHECK(got > 0 || !std::ferror(f_), DataError, "reading '", path_, "' failed: ", std::strerror(errno));
        pos_ += got;
        s_.next_in = reinterpret_cast<const uint8_t*>(in_.data());
        s_.avail_in = got;
        if (got == 0) action = LZMA_FINISH;
      }
      const lzma_ret rc = lzma_code(&s_, action);
      if (rc == LZMA_STREAM_END) {
        done_ = true;
      } else if (rc != LZMA_OK) {
        throw DataError(
            str(path_, ": corrupt or truncated xz data near byte ", pos_, " (liblzma error ", int(rc), ")"));
      }
    }
    return n - s_.avail_out;
  }
  uint64_t file_position() const override { return pos_ - s_.avail_in; }

 private:
  std::FILE* f_;
  std::vector<char> in_;
  lzma_stream s_ = LZMA_STREAM_INIT;
  uint64_t pos_ = 0;
  bool done_ = false;
};

}  // namespace

std::unique_ptr<InputStream> InputStream::open(const std::string& path) {
  MEGATON_CHECK(std::filesystem::is_regular_file(path), DataError, "--input '", path, "' is not a readable file");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  MEGATON_CHECK(f != nullptr, DataError, "cannot open '", path, "': ", std::strerror(errno));
  unsigned char magic[6] = {0};
  const size_t got = std::fread(magic, 1, sizeof(magic), f);
  std::rewind(f);
  std::unique_ptr<InputStream> s;
  if (got >= 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
    s = std::make_unique<GzipStream>(f);
  } else if (got >= 6 && std::memcmp(magic,
                                     "\xFD"
                                     "7zXZ\0",
                                     6) == 0) {
    s = std::make_unique<XzStream>(f);
  } else {
    s = std::make_unique<FileStream>(f);
  }
  s->path_ = path;
  s->file_size_ = std::filesystem::file_size(path);
  return s;
}

bool LineChunker::next(LineChunk& chunk) {
  chunk.text.clear();
  chunk.starts.clear();
  chunk.text.swap(carry_);
  carry_.clear();
  // Read until the chunk holds at least target_ bytes and one complete line, or the input ends.
  while (!eof_) {
    const size_t last_nl = chunk.text.rfind('\n');
    if (chunk.text.size() >= target_ && last_nl != std::string::npos) break;
    const size_t old = chunk.text.size();
    const size_t want = std::max<size_t>(target_ / 2, 1 << 16);
    chunk.text.resize(old + want);
    const size_t got = in_.read(&chunk.text[old], want);
    chunk.text.resize(old + got);
    if (got == 0) eof_ = true;
  }
  if (chunk.text.empty()) return false;
  size_t end = chunk.text.rfind('\n');
  if (end == std::string::npos || eof_) {
    if (chunk.text.back() != '\n') chunk.text.push_back('\n');  // last line without newline
    end = chunk.text.size() - 1;
  }
  carry_.assign(chunk.text, end + 1, std::string::npos);
  chunk.text.resize(end + 1);
  MEGATON_CHECK(chunk.text.size() < (1ull << 32), DataError, in_.path(), ":", line_,
                ": a line longer than 4 GiB is not supported");
  for (size_t p = 0; p < chunk.text.size();) {
    chunk.starts.push_back(static_cast<uint32_t>(p));
    p = chunk.text.find('\n', p) + 1;
  }
  chunk.first_line = line_;
  line_ += chunk.starts.size();
  chunk.seq = seq_++;
  chunk.file_position = in_.file_position();
  chunk.text.reserve(chunk.text.size() + 64);  // padding for the JSON parser
  return true;
}

}  // namespace megaton::data
