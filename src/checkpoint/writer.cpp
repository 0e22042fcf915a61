// save_checkpoint: the collective parallel-HDF5 writer and the crash-safe publication of the result.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>

#include "checkpoint/checkpoint.h"
#include "checkpoint/collective.h"
#include "checkpoint/crc.h"
#include "checkpoint/format.h"
#include "checkpoint/h5.h"
#include "checkpoint/sections.h"
#include "checkpoint/tracker.h"
#include "core/error.h"
#include "core/remove_tree.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace megaton::checkpoint {

std::string checkpoint_file(const std::string& dir, int64_t iteration) {
  return (fs::path(dir) / iteration_dir_name(iteration) / kFileName).string();
}

namespace {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

/// One dataset being written: its open id, the manifest record, and this rank's checksum partial.
struct Written {
  std::string path;
  h5::Id ds;
  json record;
  uint32_t partial = 0;
};

/// Creates `path` (collective) and writes this rank's slab of `local` if `designated`.
Written write_slab(hid_t file, const std::string& path, const RowSlab& slab, const torch::Tensor& local,
                   bool designated, torch::ScalarType dtype, hid_t xfer, bool collective) {
  Written w;
  w.path = path;
  w.ds = h5::create_dataset(file, path, slab.dataset_shape, dtype);
  h5::write_attr(w.ds, "dtype", dtype_name(dtype));
  w.record = {{"shape", slab.dataset_shape}, {"dtype", dtype_name(dtype)}};
  h5::Id fspace(h5::check_id(H5Dget_space(w.ds), "H5Dget_space"), H5Sclose);
  const bool mine = designated && local.defined() && !slab.box.empty();
  torch::Tensor buf;
  if (mine) {
    buf = local;
    if (buf.dim() > 0) buf = buf.narrow(0, slab.local_row_begin, slab.box.count[0]);
    buf = buf.detach().to(torch::kCPU, dtype).contiguous();
    h5::select_box(fspace, slab.box.offset, slab.box.count);
    w.partial = crc32_partial(buf.data_ptr(), slab.dataset_shape, slab.box, buf.element_size());
  } else {
    h5::select_none(fspace);
  }
  if (mine || collective) {
    h5::Id mspace = h5::make_space(mine ? slab.box.count : std::vector<int64_t>{1});
    if (!mine) h5::select_none(mspace);
    const char dummy = 0;
    h5::check(H5Dwrite(w.ds, h5::mem_type(dtype), mspace, fspace, xfer, mine ? buf.data_ptr() : &dummy),
              str("writing '", path, "'"));
  }
  return w;
}

std::string job_id_of(const SaveOptions& opts) {
  if (!opts.job_id.empty()) return opts.job_id;
  if (const char* j = std::getenv("SLURM_JOB_ID")) return j;
  return std::to_string(::getpid());
}

}  // namespace

std::string save_checkpoint(const std::string& save_dir, const CheckpointState& state, const parallel::ParamList& model,
                            const OptimState* optim, const RngState* rng, const dist::ProcessGroups& groups,
                            const SaveOptions& opts, const Logger& log) {
  MEGATON_CHECK(!save_dir.empty(), UsageError, "save_checkpoint: empty --save directory");
  MEGATON_ASSERT(groups.grid.world() == world_size(), "checkpoint I/O spans MPI_COMM_WORLD (", world_size(),
                 " ranks) but the process groups span ", groups.grid.world());
  const auto t0 = std::chrono::steady_clock::now();
  const dist::Coords me = groups.coords;
  const int tp = groups.grid.tp_size();
  const int rank = world_rank();

  // ~~~ what to write: the job-wide catalog ~~~
  std::vector<LocalTensor> local = model_tensors(model, me.tp, tp);
  if (optim && opts.save_optim) {
    auto o = optim_tensors(model, *optim, me.tp, tp);
    local.insert(local.end(), o.begin(), o.end());
  }
  const Catalog cat = gather_catalog(local, groups.grid, me);
  std::map<std::string, const LocalTensor*> mine;
  for (const auto& t : local) mine[t.path] = &t;

  // RNG: every rank the same generator names and byte lengths.
  json rng_sizes = json::object();
  if (rng && opts.save_rng)
    for (const auto& [name, t] : *rng) {
      MEGATON_ASSERT(t.scalar_type() == torch::kUInt8 && t.dim() == 1, "RNG state '", name, "' must be 1-D uint8");
      rng_sizes[name] = t.numel();
    }
  const auto all_rng = allgather_strings(rng_sizes.dump());
  for (size_t r = 0; r < all_rng.size(); ++r)
    MEGATON_ASSERT(all_rng[r] == all_rng[0], "RNG states differ between rank 0 (", all_rng[0], ") and rank ", r, " (",
                   all_rng[r], ")");

  // ~~~ the temporary directory ~~~
  const std::string job = broadcast_string(job_id_of(opts));
  const std::string final_dir = (fs::path(save_dir) / iteration_dir_name(state.iteration)).string();
  const std::string tmp_dir = final_dir + ".tmp-" + job;
  run_agreed(
      [&] {
        std::error_code ec;
        fs::create_directories(save_dir, ec);
        if (ec) throw CheckpointError(str("--save ", save_dir, ": cannot create directory: ", ec.message()));
        std::string why;
        if (!remove_tree(tmp_dir, &why)) throw CheckpointError(str("--save ", save_dir, ": ", why));
        if (!fs::create_directory(tmp_dir, ec) || ec)
          throw CheckpointError(str("--save ", save_dir, ": cannot create ", tmp_dir, ": ", ec.message()));
        for (const auto& s : stale_temporaries(save_dir))
          if (s != fs::path(tmp_dir).filename().string())
            log.warn("checkpoint: left-over temporary directory ", (fs::path(save_dir) / s).string(),
                     " from an interrupted save (safe to delete)");
      },
      rank == 0);

  // ~~~ collective write ~~~
  const std::string file_path = (fs::path(tmp_dir) / kFileName).string();
  h5::Id file = h5::create_file_parallel(file_path, MPI_COMM_WORLD);
  h5::Id xfer = h5::transfer_plist(true, opts.collective_io);
  std::vector<Written> written;
  int64_t my_bytes = 0;
  for (const auto& [path, e] : cat) {
    const ShardPlacement pl = place(e, me.tp, tp);
    auto it = mine.find(path);
    const torch::Tensor t = it == mine.end() ? torch::Tensor() : it->second->tensor;
    const bool designated = it != mine.end() && is_designated(e, me);
    const torch::ScalarType dtype = dtype_from_name(e.dtype, path);
    Written w = write_slab(file, path, pl.main, t, designated, dtype, xfer, opts.collective_io);
    h5::write_attr(w.ds, "partition_dim", static_cast<int64_t>(e.partition_dim));
    w.record["partition_dim"] = e.partition_dim;
    if (pl.has_padding) {
      h5::write_attr(w.ds, "padded_rows", e.global_shape[0]);
      w.record["padded_rows"] = e.global_shape[0];
    }
    if (designated) my_bytes += pl.main.box.numel() * c10::elementSize(dtype);
    written.push_back(std::move(w));
    if (pl.has_padding) {
      Written p = write_slab(file, path + kPaddingSuffix, pl.padding, t, designated, dtype, xfer, opts.collective_io);
      h5::write_attr(p.ds, "role", std::string("vocab_padding"));
      p.record["role"] = "vocab_padding";
      written.push_back(std::move(p));
    }
  }
  for (const auto& [name, n] : rng_sizes.items()) {
    const std::string path = rng_path(name);
    RowSlab slab;
    slab.dataset_shape = {groups.grid.world(), n.get<int64_t>()};
    slab.box = Box{{rank, 0}, {1, n.get<int64_t>()}};
    Written w =
        write_slab(file, path, slab, rng->at(name).reshape({1, -1}), true, torch::kUInt8, xfer, opts.collective_io);
    written.push_back(std::move(w));
  }

  // ~~~ checksums, manifest, metadata: identical on every rank ~~~
  std::vector<uint32_t> crcs;
  for (const auto& w : written) crcs.push_back(w.partial);
  allreduce_xor(crcs);
  json manifest = {{"format", kFormatName}, {"format_version", kFormatVersion}, {"tensors", json::object()}};
  for (size_t i = 0; i < written.size(); ++i) {
    h5::write_attr(written[i].ds, "crc32", static_cast<int64_t>(crcs[i]));
    written[i].record["crc32"] = crcs[i];
    manifest["tensors"][written[i].path] = written[i].record;
    written[i].ds.close(str("closing '", written[i].path, "'"));
  }
  const json layout = {
      {"tp", tp}, {"pp", groups.grid.pp_size()}, {"dp", groups.grid.dp_size()}, {"world", groups.grid.world()}};
  const bool w0 = rank == 0;
  h5::write_text(file, str(kMetaSection, "/manifest.json"), manifest.dump(1), w0, xfer);
  h5::write_text(file, str(kMetaSection, "/state.json"), broadcast_string(state.state.dump()), w0, xfer);
  h5::write_text(file, str(kMetaSection, "/model_config.json"), broadcast_string(state.model_config.dump()), w0, xfer);
  h5::write_text(file, str(kMetaSection, "/args.json"), broadcast_string(state.args.dump()), w0, xfer);
  h5::write_text(file, str(kMetaSection, "/layout.json"), layout.dump(), w0, xfer);
  h5::write_attr(file, "format", std::string(kFormatName));
  h5::write_attr(file, "format_version", static_cast<int64_t>(kFormatVersion));
  h5::write_attr(file, "iteration", state.iteration);
  h5::write_attr(file, "megaton_version", std::string(MEGATON_VERSION));
  h5::write_attr(file, "created_utc", broadcast_string(utc_now()));
  h5::flush(file, str(file_path, ": flush"));
  // Written last: a reader that finds it knows every dataset above is complete.
  h5::write_attr(file, "complete", int64_t{1});
  file.close(str(file_path, ": close"));

  // Every rank flushes its own dirty pages (on a parallel file system each client holds some), then agree.
  run_agreed([&] { fsync_path(file_path); });

  // ~~~ publish: rename the directory, then point the trackers at it ~~~
  run_agreed(
      [&] {
        for (int64_t it : publish_checkpoint(save_dir, tmp_dir, state.iteration, job, opts.keep_last))
          log.info("checkpoint: removed ", iteration_dir_name(it), " (--keep-last ", opts.keep_last, ")");
      },
      rank == 0);

  double bytes = static_cast<double>(my_bytes);
  MPI_Allreduce(MPI_IN_PLACE, &bytes, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log.info0("saved checkpoint ", final_dir, " (iteration ", state.iteration, ", ", cat.size(), " tensors, ",
            bytes / 1e9, " GB in ", secs, " s, ", bytes / 1e9 / std::max(secs, 1e-9), " GB/s)");
  return final_dir;
}

}  // namespace megaton::checkpoint
