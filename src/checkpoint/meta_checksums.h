// Checksums of a checkpoint's metadata blobs (meta/checksums.json: blob file name -> CRC-32 of its bytes), so an edited
// training-progress value, layout or manifest entry (and with it a tensor's recorded CRC-32) fails verification as a
// damaged tensor does. Checkpoints written before the blob existed have no checksums.json and are read as before.
#pragma once
#include <hdf5.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace megaton::checkpoint {

/// The metadata blobs covered, in meta/: manifest.json, state.json, model_config.json, args.json, layout.json.
const std::vector<std::string>& checksummed_meta_blobs();

/// A checkpoint file's checksummed metadata blobs as stored (name -> text) and its checksums.json ("" when absent).
struct MetaBlobs {
  std::map<std::string, std::string> text;
  std::string checksums;
};
/// Reads them from meta/ of `file`; CheckpointError naming `where` when a blob is missing.
MetaBlobs read_meta_blobs(hid_t file, const std::string& where);

/// The checksums.json text for `blobs` (name -> text, every name of checksummed_meta_blobs()).
std::string meta_checksums_json(const std::map<std::string, std::string>& blobs);

/// Every blob whose CRC-32 differs from checksums.json, described ("meta/state.json: crc32 stored X, data gives Y");
/// empty when all match. `checksums_text` is the checksums.json text; `where` names the file in parse errors.
std::vector<std::string> meta_checksum_mismatches(const std::map<std::string, std::string>& blobs,
                                                  const std::string& checksums_text, const std::string& where);

/// Checks the structure of a parsed manifest: "tensors" is an object whose every record is an object with "shape"
/// (non-negative integers), "dtype" (a string) and "crc32" (an unsigned integer), and integer "partition_dim" /
/// "padded_rows" / "nonfinite" when present. Throws CheckpointError naming `where` and the entry otherwise, so that
/// readers can use the records without further checks.
void validate_manifest(const nlohmann::json& manifest, const std::string& where);

}  // namespace megaton::checkpoint
