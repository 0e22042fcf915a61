#include "checkpoint/meta_checksums.h"

#include <nlohmann/json.hpp>

#include "checkpoint/crc.h"
#include "checkpoint/format.h"
#include "checkpoint/h5.h"
#include "core/error.h"

namespace megaton::checkpoint {

const std::vector<std::string>& checksummed_meta_blobs() {
  static const std::vector<std::string> names = {"manifest.json", "state.json", "model_config.json", "args.json",
                                                 "layout.json"};
  return names;
}

MetaBlobs read_meta_blobs(hid_t file, const std::string& where) {
  MetaBlobs m;
  for (const auto& name : checksummed_meta_blobs())
    m.text[name] = h5::read_text(file, str(kMetaSection, "/", name), where);
  const std::string checksums = str(kMetaSection, "/", kMetaChecksums);
  if (h5::exists(file, checksums)) m.checksums = h5::read_text(file, checksums, where);
  return m;
}

std::string meta_checksums_json(const std::map<std::string, std::string>& blobs) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& name : checksummed_meta_blobs()) {
    const auto it = blobs.find(name);
    MEGATON_ASSERT(it != blobs.end(), "metadata blob '", name, "' missing from the checksummed set");
    j[name] = crc32_bytes(it->second.data(), static_cast<int64_t>(it->second.size()));
  }
  return j.dump();
}

std::vector<std::string> meta_checksum_mismatches(const std::map<std::string, std::string>& blobs,
                                                  const std::string& checksums_text, const std::string& where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(checksums_text);
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(str(where, ": meta/checksums.json is not valid JSON (", e.what(), ")"));
  }
  MEGATON_CHECK(j.is_object(), CheckpointError, where, ": meta/checksums.json is not a JSON object");
  std::vector<std::string> out;
  for (const auto& name : checksummed_meta_blobs()) {
    const auto it = blobs.find(name);
    if (it == blobs.end()) continue;
    if (!j.contains(name) || !j[name].is_number_unsigned()) {
      out.push_back(str("meta/", name, ": no checksum in meta/checksums.json"));
      continue;
    }
    const uint32_t want = j[name].get<uint32_t>();
    const uint32_t got = crc32_bytes(it->second.data(), static_cast<int64_t>(it->second.size()));
    if (want != got) out.push_back(str("meta/", name, ": crc32 stored ", want, ", data gives ", got));
  }
  return out;
}

void validate_manifest(const nlohmann::json& manifest, const std::string& where) {
  MEGATON_CHECK(manifest.is_object() && manifest.contains("tensors") && manifest["tensors"].is_object(),
                CheckpointError, where, ": the manifest has no 'tensors' object");
  for (const auto& item : manifest["tensors"].items()) {
    const std::string& path = item.key();
    const auto& rec = item.value();
    auto bad = [&](const std::string& what) {
      return CheckpointError(str(where, ": manifest entry '", path, "' ", what));
    };
    if (!rec.is_object()) throw bad("is not an object");
    if (!rec.contains("shape") || !rec["shape"].is_array()) throw bad("has no 'shape' list");
    for (const auto& d : rec["shape"])
      if (!d.is_number_integer() || d.get<int64_t>() < 0) throw bad("has a bad dimension in 'shape'");
    if (!rec.contains("dtype") || !rec["dtype"].is_string()) throw bad("has no 'dtype' string");
    if (!rec.contains("crc32") || !rec["crc32"].is_number_unsigned() || rec["crc32"].get<uint64_t>() > 0xFFFFFFFFull)
      throw bad("has no 'crc32' (an unsigned 32-bit integer)");
    for (const char* k : {"partition_dim", "padded_rows", "nonfinite"})
      if (rec.contains(k) && !rec[k].is_number_integer()) throw bad(str("has a non-integer '", k, "'"));
  }
}

}  // namespace megaton::checkpoint
