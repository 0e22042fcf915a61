#include "train/tensorboard_writer.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/host_name.h"

namespace megaton::train {

namespace {

// ~~~ CRC-32C: reflected polynomial 0x82F63B78, table driven ~~~
std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}

// ~~~ protobuf wire format: just what Event/Summary/Value need ~~~
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_tag(std::string& out, int field, int wire_type) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | wire_type);
}
template <typename T>
void put_le(std::string& out, T v) {
  unsigned char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // x86/ARM hosts are little endian, as the format is
  out.append(reinterpret_cast<const char*>(b), sizeof(T));
}
void put_double(std::string& out, int field, double v) {
  put_tag(out, field, 1);
  put_le(out, v);
}
void put_float(std::string& out, int field, float v) {
  put_tag(out, field, 5);
  put_le(out, v);
}
void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_tag(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  static const std::array<uint32_t, 256> table = make_crc_table();  // immutable after first use
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir, int flush_every) : flush_every_(std::max(1, flush_every)) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  MEGATON_CHECK(!ec, RuntimeError, "--tensorboard-dir ", dir, ": cannot create the directory (", ec.message(), ")");
  const auto t = static_cast<long long>(now_seconds());
  path_ = (std::filesystem::path(dir) / ("events.out.tfevents." + std::to_string(t) + "." + host_name())).string();
  file_ = std::fopen(path_.c_str(), "ab");
  MEGATON_CHECK(file_ != nullptr, RuntimeError, "--tensorboard-dir: cannot open ", path_, " for writing (",
                std::strerror(errno), ")");
  std::string event;
  put_double(event, 1, now_seconds());
  put_bytes(event, 3, "brain.Event:2");
  write_record(event);
  flush();
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_) std::fclose(file_);
}

void TensorBoardWriter::write_record(const std::string& data) {
  std::string rec;
  rec.reserve(data.size() + 16);
  const uint64_t len = data.size();
  put_le(rec, len);
  put_le(rec, masked_crc32c(rec.data(), 8));
  rec += data;
  put_le(rec, masked_crc32c(data.data(), data.size()));
  MEGATON_CHECK(std::fwrite(rec.data(), 1, rec.size(), file_) == rec.size(), RuntimeError, "writing ", path_,
                " failed (", std::strerror(errno), ")");
  if (++pending_ >= flush_every_) flush();
}

void TensorBoardWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  std::string val;
  put_bytes(val, 1, tag);
  put_float(val, 2, static_cast<float>(value));
  std::string summary;
  put_bytes(summary, 1, val);
  std::string event;
  put_double(event, 1, now_seconds());
  put_tag(event, 2, 0);
  put_varint(event, static_cast<uint64_t>(step));
  put_bytes(event, 5, summary);
  write_record(event);
}

void TensorBoardWriter::add_scalar_vs_progress(const std::string& tag, double value, int64_t iteration, int64_t samples,
                                               int64_t tokens) {
  add_scalar(tag, value, iteration);
  add_scalar(tag + " vs samples", value, samples);
  add_scalar(tag + " vs tokens", value, tokens);
}

void TensorBoardWriter::flush() {
  MEGATON_CHECK(std::fflush(file_) == 0, RuntimeError, "flushing ", path_, " failed (", std::strerror(errno), ")");
  pending_ = 0;
}

}  // namespace megaton::train
