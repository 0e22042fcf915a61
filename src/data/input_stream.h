// Streaming reads of plain, gzip (.gz) and xz (.xz) files, detected by magic bytes, with the compressed position
// exposed for progress/ETA; and a line chunker that hands out whole lines in ~1 MiB chunks with their line numbers.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace megaton::data {

class InputStream {
 public:
  /// Opens `path`; DataError when it cannot be opened or is a corrupt compressed stream.
  static std::unique_ptr<InputStream> open(const std::string& path);
  virtual ~InputStream() = default;
  /// Reads up to n decompressed bytes; returns 0 at end of input.
  virtual size_t read(char* buf, size_t n) = 0;
  /// Bytes of the underlying file consumed so far, and the file size (for ETA).
  virtual uint64_t file_position() const = 0;
  uint64_t file_size() const { return file_size_; }
  const std::string& path() const { return path_; }

 protected:
  std::string path_;
  uint64_t file_size_ = 0;
};

/// A run of whole lines: text holds them back to back ('\n'-terminated), starts[i] the offset of line i,
/// first_line the 1-based number of line 0. `text` has spare capacity for parsers that over-read (padding).
struct LineChunk {
  uint64_t seq = 0;
  uint64_t first_line = 1;
  std::string text;
  std::vector<uint32_t> starts;
  uint64_t file_position = 0;
  size_t num_lines() const { return starts.size(); }
  std::string_view line(size_t i) const {
    const size_t b = starts[i];
    const size_t e = (i + 1 < starts.size() ? starts[i + 1] : text.size()) - 1;  // drop '\n'
    return std::string_view(text).substr(b, e - b);
  }
};

class LineChunker {
 public:
  LineChunker(InputStream& in, size_t target_bytes = 1 << 20) : in_(in), target_(target_bytes) {}
  /// Fills `chunk` with the next lines; false at end of input.
  bool next(LineChunk& chunk);

 private:
  InputStream& in_;
  size_t target_;
  std::string carry_;
  uint64_t line_ = 1, seq_ = 0;
  bool eof_ = false;
};

}  // namespace megaton::data
