#include "checkpoint/file.h"

#include <filesystem>

#include "checkpoint/crc.h"
#include "checkpoint/format.h"
#include "checkpoint/meta_checksums.h"
#include "checkpoint/nonfinite.h"
#include "checkpoint/tracker.h"
#include "core/error.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace megaton::checkpoint {

namespace {
json parse(const std::string& text, const std::string& where) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw CheckpointError(str(where, ": not valid JSON (", e.what(), ")"));
  }
}
}  // namespace

CheckpointFile::CheckpointFile(const std::string& path) : path_(path) {
  try {
    open_checked(path);
  } catch (const json::exception& e) {  // metadata of the wrong JSON types: a checkpoint error, never an internal one
    throw CheckpointError(str(path, ": malformed metadata (", e.what(), ")"));
  }
}

void CheckpointFile::open_checked(const std::string& path) {
  file_ = h5::open_file_serial(path, false);
  const std::string fmt = h5::read_attr_string(file_, "format", path);
  MEGATON_CHECK(fmt == kFormatName, CheckpointError, path, ": format '", fmt, "' is not '", kFormatName, "'");
  version_ = static_cast<int>(h5::read_attr_int(file_, "format_version", path));
  MEGATON_CHECK(version_ >= 1 && version_ <= kFormatVersion, CheckpointError, path, ": format version ", version_,
                " is not supported (this megaton reads 1..", kFormatVersion, ")");
  MEGATON_CHECK(h5::has_attr(file_, "complete") && h5::read_attr_int(file_, "complete", path) == 1, CheckpointError,
                path, ": incomplete checkpoint (the save did not finish)");
  meta_.iteration = h5::read_attr_int(file_, "iteration", path);
  blobs_ = read_meta_blobs(file_, path);
  manifest_ = parse(blobs_.text["manifest.json"], path + " manifest");
  validate_manifest(manifest_, path);
  meta_.state = parse(blobs_.text["state.json"], path + " state.json");
  meta_.model_config = parse(blobs_.text["model_config.json"], path + " model_config.json");
  meta_.args = parse(blobs_.text["args.json"], path + " args.json");
  const json l = parse(blobs_.text["layout.json"], path + " layout.json");
  layout_ = SavedLayout{l.value("tp", 1), l.value("pp", 1), l.value("dp", 1), l.value("world", 1)};
}

std::string CheckpointFile::attr(const std::string& name) const {
  return h5::has_attr(file_, name) ? h5::read_attr_string(file_, name, path_) : "";
}

std::vector<std::string> CheckpointFile::tensor_paths() const {
  std::vector<std::string> out;
  for (const auto& [p, rec] : manifest_["tensors"].items()) out.push_back(p);
  return out;
}

bool CheckpointFile::has(const std::string& path) const {
  return manifest_["tensors"].contains(path);
}

int64_t CheckpointFile::bytes(const std::string& path) const {
  const auto& rec = manifest_.at("tensors").at(path);
  return stored_bytes(rec.at("dtype").get<std::string>(), rec.at("shape").get<std::vector<int64_t>>(),
                      str(path_, " '", path, "'"));
}

int64_t CheckpointFile::bytes_under(const std::string& prefix) const {
  int64_t n = 0;
  for (const auto& [p, rec] : manifest_.at("tensors").items())
    if (p.rfind(prefix, 0) == 0) n += bytes(p);
  return n;
}

torch::Tensor CheckpointFile::read(const std::string& path) const {
  MEGATON_CHECK(has(path), CheckpointError, path_, ": no tensor '", path, "'");
  const json& rec = manifest_["tensors"][path];
  const auto shape = rec.at("shape").get<std::vector<int64_t>>();
  const auto dtype = dtype_from_name(rec.at("dtype").get<std::string>(), str(path_, " '", path, "'"));
  MEGATON_CHECK(h5::exists(file_, path), CheckpointError, path_, ": tensor '", path,
                "' is listed in the manifest but missing from the file");
  h5::Id ds = h5::open_dataset(file_, path);
  h5::Id space(h5::check_id(H5Dget_space(ds), "H5Dget_space"), H5Sclose);
  const auto actual = h5::space_shape(space);
  MEGATON_CHECK(actual == shape, CheckpointError, path_, ": tensor '", path, "' has shape ", shape_str(actual),
                " but the manifest says ", shape_str(shape));
  torch::Tensor t = torch::empty(shape, torch::TensorOptions().dtype(dtype));
  if (t.numel() > 0)
    h5::check(H5Dread(ds, h5::mem_type(dtype), H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data_ptr()),
              str(path_, ": reading '", path, "'"));
  return t;
}

std::vector<CheckpointFile::Problem> CheckpointFile::verify() const {
  std::vector<Problem> out;
  if (!blobs_.checksums.empty())
    for (const auto& what : meta_checksum_mismatches(blobs_.text, blobs_.checksums, path_))
      out.push_back({what.substr(0, what.find(':')), what.substr(what.find(':') + 2)});
  for (const auto& p : tensor_paths()) {
    try {
      const torch::Tensor t = read(p);
      const json& rec = manifest_["tensors"][p];
      h5::Id ds = h5::open_dataset(file_, p);
      const std::string dt = h5::read_attr_string(ds, "dtype", p);
      const std::string want_dt = rec.at("dtype").get<std::string>();
      if (dt != want_dt) out.push_back({p, str("dtype attribute '", dt, "' but the manifest says '", want_dt, "'")});
      const uint32_t want = rec.at("crc32").get<uint32_t>();
      const uint32_t got = crc32_bytes(t.data_ptr(), t.numel() * t.element_size());
      if (got != want) out.push_back({p, str("crc32 mismatch: stored ", want, ", data gives ", got)});
      if (h5::has_attr(ds, "crc32") && static_cast<uint32_t>(h5::read_attr_int(ds, "crc32", p)) != want)
        out.push_back({p, str("crc32 attribute ", h5::read_attr_int(ds, "crc32", p), " but the manifest says ", want)});
      {
        const int64_t bad = count_nonfinite(t);
        if (bad > 0) out.push_back({p, str(bad, " non-finite values (NaN or inf) of ", t.numel())});
      }
    } catch (const Error& e) {
      out.push_back({p, e.what()});
    }
  }
  return out;
}

}  // namespace megaton::checkpoint
