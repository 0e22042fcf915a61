// TensorBoard scalars without TensorFlow: an events file (events.out.tfevents.<unix time>.<host>) of TFRecords, each
// [uint64 length][uint32 masked crc32c(length)][Event protobuf][uint32 masked crc32c(data)], little endian, where
// masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8. The first record is Event{wall_time, file_version:
// "brain.Event:2"}; each scalar is Event{wall_time, step, summary: Summary{value: [Value{tag, simple_value}]}}.
// Only those protobuf fields are written (hand-encoded wire format: Event.wall_time=1 double, step=2 int64,
// file_version=3 string, summary=5; Summary.value=1; Value.tag=1 string, simple_value=2 float).
// Why not libprotobuf: these seven fields are write-only and fixed by TensorBoard's schema; generated code would add
// protoc and libprotobuf to every build, the GPU nodes' carried packages included, for some forty lines of
// tag-length-value encoding. tests/train/tensorboard_writer_test.cpp checks the bytes against an independent decoder
// (tests/train/tensorboard_decode.py: framing, both CRCs, every field).
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

namespace megaton::train {

/// CRC-32C (Castagnoli), as TFRecord uses it; crc32c("123456789") == 0xE3069283.
uint32_t crc32c(const void* data, size_t n);
uint32_t masked_crc32c(const void* data, size_t n);

class TensorBoardWriter {
 public:
  /// Creates `dir` if needed and opens a new events file in it (RuntimeError naming the path on failure).
  /// flush_every: records buffered before a flush (--tensorboard-queue-size); 1 flushes every record.
  explicit TensorBoardWriter(const std::string& dir, int flush_every = 1);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  void add_scalar(const std::string& tag, double value, int64_t step);
  /// Megatron-DeepSpeed's triple: `tag` at the iteration, "<tag> vs samples" at consumed samples and
  /// "<tag> vs tokens" at consumed tokens.
  void add_scalar_vs_progress(const std::string& tag, double value, int64_t iteration, int64_t samples, int64_t tokens);
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& data);

  std::string path_;
  std::FILE* file_ = nullptr;
  int flush_every_;
  int pending_ = 0;
};

}  // namespace megaton::train
