#include "checkpoint/serial_writer.h"

#include <unistd.h>

#include <filesystem>

#include "checkpoint/crc.h"
#include "checkpoint/format.h"
#include "checkpoint/tracker.h"
#include "core/error.h"
#include "core/remove_tree.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace megaton::checkpoint {

SerialWriter::SerialWriter(const std::string& save_dir, int64_t iteration)
    : save_dir_(save_dir), job_(std::to_string(::getpid())), iteration_(iteration) {
  MEGATON_CHECK(!save_dir.empty(), UsageError, "--save is required");
  std::error_code ec;
  fs::create_directories(save_dir, ec);
  if (ec) throw CheckpointError(str("--save ", save_dir, ": cannot create directory: ", ec.message()));
  tmp_dir_ = (fs::path(save_dir) / iteration_dir_name(iteration)).string() + ".tmp-" + job_;
  std::string why;
  if (!remove_tree(tmp_dir_, &why)) throw CheckpointError(str("--save ", save_dir, ": ", why));
  fs::create_directory(tmp_dir_);
  path_ = (fs::path(tmp_dir_) / kFileName).string();
  file_ = h5::create_file_serial(path_);
  manifest_ = {{"format", kFormatName}, {"format_version", kFormatVersion}, {"tensors", json::object()}};
}

SerialWriter::~SerialWriter() {
  if (finished_) return;
  file_.reset();
  remove_tree(tmp_dir_);  // an unfinished conversion leaves nothing behind
}

void SerialWriter::add(const std::string& path, const torch::Tensor& t0, const json& extra) {
  const torch::Tensor t = t0.detach().to(torch::kCPU).contiguous();
  const torch::ScalarType dt = t.scalar_type();
  h5::Id ds = h5::create_dataset(file_, path, t.sizes().vec(), dt);
  if (t.numel() > 0)
    h5::check(H5Dwrite(ds, h5::mem_type(dt), H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data_ptr()), str("writing '", path, "'"));
  const uint32_t crc = crc32_bytes(t.data_ptr(), t.numel() * t.element_size());
  json rec = extra;
  rec["shape"] = t.sizes().vec();
  rec["dtype"] = dtype_name(dt);
  rec["crc32"] = crc;
  h5::write_attr(ds, "dtype", dtype_name(dt));
  h5::write_attr(ds, "crc32", static_cast<int64_t>(crc));
  if (rec.contains("partition_dim")) h5::write_attr(ds, "partition_dim", rec["partition_dim"].get<int64_t>());
  if (rec.contains("padded_rows")) h5::write_attr(ds, "padded_rows", rec["padded_rows"].get<int64_t>());
  if (rec.contains("role")) h5::write_attr(ds, "role", rec["role"].get<std::string>());
  manifest_["tensors"][path] = rec;
}

void SerialWriter::add_vocab_padded(const std::string& path, const torch::Tensor& t, int64_t real_rows,
                                    int partition_dim) {
  const int64_t rows = t.size(0);
  MEGATON_ASSERT(real_rows > 0 && real_rows < rows, "add_vocab_padded '", path, "': ", real_rows, " real rows of ",
                 rows);
  add(path, t.narrow(0, 0, real_rows), {{"partition_dim", partition_dim}, {"padded_rows", rows}});
  add(path + kPaddingSuffix, t.narrow(0, real_rows, rows - real_rows), {{"role", "vocab_padding"}});
}

std::string SerialWriter::finish(const CheckpointState& state, const SavedLayout& layout, const std::string& provenance,
                                 int keep_last) {
  const json l = {{"tp", layout.tp}, {"pp", layout.pp}, {"dp", layout.dp}, {"world", layout.world}};
  h5::Id xfer = h5::transfer_plist(false, false);
  h5::write_text(file_, str(kMetaSection, "/manifest.json"), manifest_.dump(1), true, xfer);
  h5::write_text(file_, str(kMetaSection, "/state.json"), state.state.dump(), true, xfer);
  h5::write_text(file_, str(kMetaSection, "/model_config.json"), state.model_config.dump(), true, xfer);
  h5::write_text(file_, str(kMetaSection, "/args.json"), state.args.dump(), true, xfer);
  h5::write_text(file_, str(kMetaSection, "/layout.json"), l.dump(), true, xfer);
  h5::write_attr(file_, "format", std::string(kFormatName));
  h5::write_attr(file_, "format_version", static_cast<int64_t>(kFormatVersion));
  h5::write_attr(file_, "iteration", iteration_);
  h5::write_attr(file_, "megaton_version", std::string(MEGATON_VERSION));
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  h5::write_attr(file_, "created_utc", std::string(buf));
  if (!provenance.empty()) h5::write_attr(file_, "resharded_from", provenance);
  h5::flush(file_, path_);
  h5::write_attr(file_, "complete", int64_t{1});
  file_.close(path_);
  fsync_path(path_);
  publish_checkpoint(save_dir_, tmp_dir_, iteration_, job_, keep_last);
  finished_ = true;
  return (fs::path(save_dir_) / iteration_dir_name(iteration_)).string();
}

}  // namespace megaton::checkpoint
