// Writes a checkpoint from one process without MPI (reshard, import-hf): tensors are added whole, each with its
// CRC-32; finish() writes the metadata and the `complete` mark and publishes the directory like a parallel save.
#pragma once
#include <torch/torch.h>

#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/checkpoint.h"
#include "checkpoint/h5.h"

namespace megaton::checkpoint {

class SerialWriter {
 public:
  /// Starts <save_dir>/<iter dir>.tmp-<pid>/model_optim.h5.
  SerialWriter(const std::string& save_dir, int64_t iteration);
  ~SerialWriter();
  /// `extra` carries manifest fields to keep (partition_dim, padded_rows, role); dtype/shape/crc32 are computed.
  void add(const std::string& path, const torch::Tensor& t, const nlohmann::json& extra = nlohmann::json::object());
  /// A tensor whose rows past `real_rows` are vocabulary padding: the real rows at `path` (recording the padded row
  /// count), the rest at <path>.vocab_padding, as a parallel save stores them. `partition_dim` is the manifest's.
  void add_vocab_padded(const std::string& path, const torch::Tensor& t, int64_t real_rows, int partition_dim);
  /// Writes meta/*.json and root attributes, closes, fsyncs and publishes; returns the published directory.
  std::string finish(const CheckpointState& state, const SavedLayout& layout, const std::string& provenance,
                     int keep_last = 0);
  size_t count() const { return manifest_["tensors"].size(); }

 private:
  std::string save_dir_, tmp_dir_, path_, job_;
  int64_t iteration_;
  h5::Id file_;
  nlohmann::json manifest_;
  bool finished_ = false;
};

}  // namespace megaton::checkpoint
