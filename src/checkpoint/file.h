// One checkpoint file read whole, by one process, without MPI-IO: for `megaton inspect`, `reshard`, `export-hf` and
// tests. Opening checks the format name, version and completeness; verify() re-computes every checksum.
#pragma once
#include <torch/torch.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/h5.h"
#include "checkpoint/meta_checksums.h"

namespace megaton::checkpoint {

class CheckpointFile {
 public:
  explicit CheckpointFile(const std::string& path);

  const std::string& path() const { return path_; }
  int64_t iteration() const { return meta_.iteration; }
  int format_version() const { return version_; }
  const CheckpointState& meta() const { return meta_; }
  const SavedLayout& layout() const { return layout_; }
  /// "tensors" -> path -> {shape, dtype, crc32, partition_dim, padded_rows?, role?}.
  const nlohmann::json& manifest() const { return manifest_; }
  std::string attr(const std::string& name) const;  // a root string attribute ("" when absent)
  /// Whether meta/checksums.json covers the metadata (checkpoints of older megaton versions have none).
  bool has_meta_checksums() const { return !blobs_.checksums.empty(); }

  std::vector<std::string> tensor_paths() const;
  bool has(const std::string& path) const;
  /// The bytes of the stored tensor `path` (its manifest shape and dtype); those of every path starting with
  /// `prefix`.
  int64_t bytes(const std::string& path) const;
  int64_t bytes_under(const std::string& prefix) const;
  /// The whole tensor `path` in its stored dtype (CPU), shape as in the manifest.
  torch::Tensor read(const std::string& path) const;
  /// The model tensor `name` with its vocabulary padding rows dropped (they are separate datasets anyway).
  torch::Tensor read_model(const std::string& name) const { return read("model/" + name); }

  struct Problem {
    std::string path;
    std::string what;
  };
  /// Checks the metadata blobs' checksums and every manifest entry: the dataset exists with the recorded shape and
  /// dtype, its CRC-32 matches (data and attribute), and a floating-point tensor holds no NaN or inf.
  std::vector<Problem> verify() const;

 private:
  void open_checked(const std::string& path);

  std::string path_;
  h5::Id file_;
  int version_ = 0;
  CheckpointState meta_;
  SavedLayout layout_;
  nlohmann::json manifest_;
  MetaBlobs blobs_;  // the checksummed metadata texts and meta/checksums.json
};

}  // namespace megaton::checkpoint
