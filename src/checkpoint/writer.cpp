// save_checkpoint: the collective parallel-HDF5 writer and the crash-safe publication of the result.
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <future>

#include "checkpoint/checkpoint.h"
#include "checkpoint/collective.h"
#include "checkpoint/crc.h"
#include "checkpoint/early_writeback.h"
#include "checkpoint/format.h"
#include "checkpoint/h5.h"
#include "checkpoint/io_watchdog.h"
#include "checkpoint/meta_checksums.h"
#include "checkpoint/nonfinite.h"
#include "checkpoint/sections.h"
#include "checkpoint/tracker.h"
#include "core/error.h"
#include "core/format.h"
#include "core/remove_tree.h"
#include "core/timer.h"

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
  int64_t nonfinite = 0;  // this rank's non-finite values (floating dtypes)
};

/// This rank's slab of a tensor, on the host in the stored dtype, with its checksum partial and non-finite count.
struct Slab {
  torch::Tensor buf;  // undefined when this rank writes nothing
  uint32_t partial = 0;
  int64_t nonfinite = 0;
};

/// Host memory reused across a save's tensors for the slabs that need a copy (from a GPU, to another dtype, or out of
/// a strided view): a fresh allocation per tensor has every page faulted in and zeroed by the kernel first, which
/// cost as much as the checksum. Pinned when the source is on a GPU (its copy then runs at the link's speed). Four
/// slots: a tensor's main slab and its vocabulary padding, for the tensor being written and the next one.
class StagingBuffers {
 public:
  /// An uninitialised tensor of `shape` and `dtype` in slot `slot`'s memory, valid until the slot is taken again.
  torch::Tensor take(int slot, torch::IntArrayRef shape, torch::ScalarType dtype, bool pinned) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    const int64_t bytes = std::max<int64_t>(numel * static_cast<int64_t>(c10::elementSize(dtype)), 1);
    torch::Tensor& b = bytes_[static_cast<size_t>(slot)];
    if (!b.defined() || b.numel() < bytes || b.is_pinned() != pinned)
      b = torch::empty({bytes}, torch::TensorOptions().dtype(torch::kUInt8).pinned_memory(pinned));
    return b.narrow(0, 0, numel * static_cast<int64_t>(c10::elementSize(dtype))).view(dtype).view(shape);
  }

 private:
  std::array<torch::Tensor, 4> bytes_;  // two tensors (main and padding slabs) in flight
};

/// Local work only (device-to-host copy, dtype conversion, checksum), kept apart from the collective HDF5 calls so
/// that a failure here is agreed before any rank enters them. A slab that needs a copy lands in `staging`'s `slot`.
/// `count_nonfinite` false: the state was refused already if it held any (SaveOptions::refuse_nonfinite), so the
/// count is 0 without another pass over the host copy.
Slab prepare_slab(const RowSlab& slab, const torch::Tensor& local, bool designated, torch::ScalarType dtype,
                  StagingBuffers& staging, int slot, bool count_nonfinite = true) {
  Slab s;
  if (!designated || !local.defined() || slab.box.empty()) return s;
  torch::Tensor buf = local;
  if (buf.dim() > 0) buf = buf.narrow(0, slab.local_row_begin, slab.box.count[0]);
  buf = buf.detach();
  if (buf.is_cpu() && buf.scalar_type() == dtype && buf.is_contiguous()) {
    s.buf = buf;  // written from where it is
  } else {
    s.buf = staging.take(slot, buf.sizes(), dtype, buf.is_cuda());
    s.buf.copy_(buf);
  }
  s.partial = crc32_partial(s.buf.data_ptr(), slab.dataset_shape, slab.box, s.buf.element_size());
  if (count_nonfinite) s.nonfinite = checkpoint::count_nonfinite(s.buf);
  return s;
}

/// Creates `path` (collective) and writes this rank's slab (if it has one).
Written write_slab(hid_t file, const std::string& path, const RowSlab& slab, const Slab& mine_slab,
                   torch::ScalarType dtype, hid_t xfer, bool collective) {
  Written w;
  w.path = path;
  w.partial = mine_slab.partial;
  w.nonfinite = mine_slab.nonfinite;
  w.ds = h5::create_dataset(file, path, slab.dataset_shape, dtype);
  h5::write_attr(w.ds, "dtype", dtype_name(dtype));
  w.record = {{"shape", slab.dataset_shape}, {"dtype", dtype_name(dtype)}};
  h5::Id fspace(h5::check_id(H5Dget_space(w.ds), "H5Dget_space"), H5Sclose);
  const bool mine = mine_slab.buf.defined();
  if (mine)
    h5::select_box(fspace, slab.box.offset, slab.box.count);
  else
    h5::select_none(fspace);
  if (mine || collective) {
    h5::Id mspace = h5::make_space(mine ? slab.box.count : std::vector<int64_t>{1});
    if (!mine) h5::select_none(mspace);
    const char dummy = 0;
    const herr_t rc =
        H5Dwrite(w.ds, h5::mem_type(dtype), mspace, fspace, xfer, mine ? mine_slab.buf.data_ptr() : &dummy);
    if (rc < 0) w.ds.abandon();  // see Id::abandon
    h5::check(rc, str("writing '", path, "'"));
  }
  return w;
}

/// CheckpointError naming the first of this rank's tensors that holds NaN or inf (checked on its device, before
/// anything is written).
void refuse_nonfinite(const std::vector<LocalTensor>& local) {
  for (const auto& t : local) {
    if (!t.tensor.defined()) continue;
    const int64_t n = count_nonfinite(t.tensor);
    if (n == 0) continue;
    throw CheckpointError(str("'", t.path, "' holds ", n,
                              " non-finite values (NaN or inf): the training state diverged and is not saved over "
                              "the finite checkpoints"));
  }
}

/// "saving iteration N to DIR failed: <what>" and what is left as it was.
CheckpointError save_failed(int64_t iteration, const std::string& save_dir, const std::string& what,
                            const std::string& left) {
  return CheckpointError(str("saving iteration ", iteration, " to ", save_dir, " failed: ", what, "\n  ", left));
}

/// The size of the checkpoint file: every dataset's bytes, the RNG rows and room for HDF5's and megaton's metadata.
int64_t file_bytes(const Catalog& cat, const json& rng_sizes, int world) {
  int64_t bytes = int64_t{64} << 10;
  for (const auto& [path, e] : cat) bytes += catalog_entry_bytes(e);
  for (const auto& [name, n] : rng_sizes.items()) bytes += n.get<int64_t>() * world;
  return bytes;
}

/// Checks that `bytes` fit in `dir`'s file system (and quota) before anything is written: a reservation file is
/// allocated and removed. A full disk is then a clear error up front rather than a write failing midway. File
/// systems without fallocate() are not checked.
void reserve_space(const std::string& dir, int64_t bytes) {
  const std::string path = (fs::path(dir) / ".space-reservation").string();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) throw CheckpointError(str(path, ": cannot create: ", std::strerror(errno)));
  const int rc = ::fallocate(fd, 0, 0, bytes);
  const int err = rc == 0 ? 0 : errno;
  ::close(fd);
  ::unlink(path.c_str());
  if (err == ENOSPC || err == EDQUOT) {
    std::error_code ec;
    const auto sp = fs::space(dir, ec);
    throw CheckpointError(str("the checkpoint needs ", bytes, " bytes (", gigabytes(static_cast<double>(bytes)),
                              ") in ", dir, " but ",
                              ec ? std::string("the file system refused them")
                                 : str("only ", gigabytes(static_cast<double>(sp.available)), " are free"),
                              " (", std::strerror(err), "): free space or raise the quota, or save elsewhere"));
  }
}

std::string job_id_of(const SaveOptions& opts) {
  if (!opts.job_id.empty()) return opts.job_id;
  if (const char* j = std::getenv("SLURM_JOB_ID")) return j;
  return std::to_string(::getpid());
}

/// What write_file wrote: this rank's bytes, and the job's non-finite values.
struct WriteResult {
  int64_t my_bytes = 0;
  int64_t nonfinite = 0;
};

/// The steps of write_file, every one agreed; `file`, `xfer` and `written` are the caller's (abandoned on failure).
WriteResult write_file_steps(const std::string& file_path, const Catalog& cat,
                             const std::map<std::string, const LocalTensor*>& mine, const RngState* rng,
                             const json& rng_sizes, const CheckpointState& state, const dist::ProcessGroups& groups,
                             const SaveOptions& opts, IoWatchdog& dog, const Logger& log, h5::Id& file, h5::Id& xfer,
                             std::vector<Written>& written) {
  const dist::Coords me = groups.coords;
  const int tp = groups.grid.tp_size();
  const int rank = world_rank();
  agreed_step([&] {
    file = h5::create_file_parallel(file_path, MPI_COMM_WORLD);
    xfer = h5::transfer_plist(true, opts.collective_io);
  });
  int64_t my_bytes = 0;
  EarlyWriteback writeback(file_path);
  StagingBuffers staging;
  // Rank 0 reports the job's progress every kProgressEverySeconds: the tensors' bytes written by every rank.
  Progress shown(static_cast<double>(file_bytes(cat, rng_sizes, groups.grid.world())), "GB", 1e9);
  double done = 0;
  // Tensor k + 1 is prepared (device-to-host copy, CRC, non-finite count) on a helper thread while tensor k is written,
  // in the other half of the staging buffers.
  struct Prepared {
    ShardPlacement pl;
    bool designated = false;
    torch::ScalarType dtype = torch::kFloat32;
    Slab main, padding;
  };
  std::vector<const Catalog::value_type*> entries;
  for (const auto& kv : cat) entries.push_back(&kv);
  auto prepare = [&](size_t k) {
    const auto& [path, e] = *entries[k];
    auto it = mine.find(path);
    const torch::Tensor t = it == mine.end() ? torch::Tensor() : it->second->tensor;
    const int slot = 2 * static_cast<int>(k % 2);
    Prepared p;
    p.pl = place(e, me.tp, tp);
    p.designated = it != mine.end() && is_designated(e, me);
    p.dtype = dtype_from_name(e.dtype, path);
    p.main = prepare_slab(p.pl.main, t, p.designated, p.dtype, staging, slot, !opts.refuse_nonfinite);
    if (p.pl.has_padding)
      p.padding = prepare_slab(p.pl.padding, t, p.designated, p.dtype, staging, slot + 1, !opts.refuse_nonfinite);
    return p;
  };
  std::future<Prepared> next;
  if (!entries.empty()) next = std::async(std::launch::async, prepare, 0);
  for (size_t k = 0; k < entries.size(); ++k) {
    const auto& [path, e] = *entries[k];
    dog.progress(path);
    if (shown.due(opts.progress_every_s))
      log.info0("checkpoint: saving iteration ", state.iteration, ": ", shown.line(done));
    done += static_cast<double>(catalog_entry_bytes(e));
    Prepared cur;
    agreed_step([&] { cur = next.get(); });
    if (k + 1 < entries.size()) next = std::async(std::launch::async, prepare, k + 1);
    const ShardPlacement& pl = cur.pl;
    const bool designated = cur.designated;
    const torch::ScalarType dtype = cur.dtype;
    agreed_step([&] {
      Written w = write_slab(file, path, pl.main, cur.main, dtype, xfer, opts.collective_io);
      h5::write_attr(w.ds, "partition_dim", static_cast<int64_t>(e.partition_dim));
      w.record["partition_dim"] = e.partition_dim;
      if (pl.has_padding) {
        h5::write_attr(w.ds, "padded_rows", e.global_shape[0]);
        w.record["padded_rows"] = e.global_shape[0];
      }
      if (designated) {
        my_bytes += pl.main.box.numel() * c10::elementSize(dtype);
        writeback.wrote(pl.main.box.numel() * c10::elementSize(dtype));
      }
      written.push_back(std::move(w));
      if (pl.has_padding) {
        Written p = write_slab(file, path + kPaddingSuffix, pl.padding, cur.padding, dtype, xfer, opts.collective_io);
        h5::write_attr(p.ds, "role", std::string("vocab_padding"));
        p.record["role"] = "vocab_padding";
        written.push_back(std::move(p));
      }
    });
  }
  for (const auto& [name, n] : rng_sizes.items()) {
    dog.progress(rng_path(name));
    RowSlab slab;
    slab.dataset_shape = {groups.grid.world(), n.get<int64_t>()};
    slab.box = Box{{rank, 0}, {1, n.get<int64_t>()}};
    Slab local;
    agreed_step([&] { local = prepare_slab(slab, rng->at(name).reshape({1, -1}), true, torch::kUInt8, staging, 0); });
    agreed_step([&] {
      written.push_back(write_slab(file, rng_path(name), slab, local, torch::kUInt8, xfer, opts.collective_io));
    });
  }

  // ~~~ checksums, non-finite counts, manifest, metadata: identical on every rank ~~~
  std::vector<uint32_t> crcs;
  std::vector<int64_t> nonfinite;
  for (const auto& w : written) {
    crcs.push_back(w.partial);
    nonfinite.push_back(w.nonfinite);
  }
  allreduce_xor(crcs);
  allreduce_sum(nonfinite);
  int64_t total_nonfinite = 0;
  for (int64_t n : nonfinite) total_nonfinite += n;
  const json layout = {
      {"tp", tp}, {"pp", groups.grid.pp_size()}, {"dp", groups.grid.dp_size()}, {"world", groups.grid.world()}};
  const std::string state_text = broadcast_string(state.state.dump());
  const std::string model_config_text = broadcast_string(state.model_config.dump());
  const std::string args_text = broadcast_string(state.args.dump());
  const std::string created = broadcast_string(utc_now());
  dog.progress("metadata");
  agreed_step([&] {
    json manifest = {{"format", kFormatName}, {"format_version", kFormatVersion}, {"tensors", json::object()}};
    for (size_t i = 0; i < written.size(); ++i) {
      h5::write_attr(written[i].ds, "crc32", static_cast<int64_t>(crcs[i]));
      written[i].record["crc32"] = crcs[i];
      if (nonfinite[i] > 0) written[i].record["nonfinite"] = nonfinite[i];
      manifest["tensors"][written[i].path] = written[i].record;
      written[i].ds.close(str("closing '", written[i].path, "'"));
    }
    // The metadata blobs and their checksums: an edited progress value or manifest entry fails verification.
    const std::map<std::string, std::string> blobs = {{"manifest.json", manifest.dump(1)},
                                                      {"state.json", state_text},
                                                      {"model_config.json", model_config_text},
                                                      {"args.json", args_text},
                                                      {"layout.json", layout.dump()}};
    const bool w0 = rank == 0;
    for (const auto& [name, text] : blobs) h5::write_text(file, str(kMetaSection, "/", name), text, w0, xfer);
    h5::write_text(file, str(kMetaSection, "/", kMetaChecksums), meta_checksums_json(blobs), w0, xfer);
    h5::write_attr(file, "format", std::string(kFormatName));
    h5::write_attr(file, "format_version", static_cast<int64_t>(kFormatVersion));
    h5::write_attr(file, "iteration", state.iteration);
    h5::write_attr(file, "megaton_version", std::string(MEGATON_VERSION));
    h5::write_attr(file, "created_utc", created);
    h5::write_attr(file, "nonfinite_values", total_nonfinite);
    h5::flush(file, str(file_path, ": flush"));
  });
  // Written last: a reader that finds it knows every dataset above is complete.
  dog.progress("closing the file");
  agreed_step([&] { h5::write_attr(file, "complete", int64_t{1}); });
  agreed_step([&] { file.close(str(file_path, ": close")); });
  return {my_bytes, total_nonfinite};
}

/// The collective write of the checkpoint file (every step agreed): what this rank wrote, the job's non-finite values.
/// On a failure every rank throws the same CheckpointError with the file and its datasets abandoned (Id::abandon).
WriteResult write_file(const std::string& file_path, const Catalog& cat,
                       const std::map<std::string, const LocalTensor*>& mine, const RngState* rng,
                       const json& rng_sizes, const CheckpointState& state, const dist::ProcessGroups& groups,
                       const SaveOptions& opts, IoWatchdog& dog, const Logger& log) {
  h5::Id file, xfer;
  std::vector<Written> written;
  try {
    return write_file_steps(file_path, cat, mine, rng, rng_sizes, state, groups, opts, dog, log, file, xfer, written);
  } catch (...) {
    for (auto& w : written) w.ds.abandon();
    file.abandon();
    throw;
  }
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
  if (opts.refuse_nonfinite) run_agreed([&] { refuse_nonfinite(local); });

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
        try {
          reserve_space(tmp_dir, file_bytes(cat, rng_sizes, groups.grid.world()));
        } catch (const CheckpointError& e) {
          remove_tree(tmp_dir, nullptr);
          throw save_failed(state.iteration, save_dir, e.what(),
                            "nothing was written: the previous checkpoint and the tracker files are unchanged");
        }
        write_temporary_owner(tmp_dir, job);
        for (const auto& s : stale_temporaries(save_dir)) {
          if (s == fs::path(tmp_dir).filename().string()) continue;
          const std::string stale = (fs::path(save_dir) / s).string();
          std::string why;
          if (temporary_is_orphaned(stale, job, &why) && remove_tree(stale, nullptr))
            log.info("checkpoint: removed left-over temporary directory ", stale, " of an interrupted save (", why,
                     ")");
          else
            log.warn("checkpoint: left-over temporary directory ", stale,
                     " from an interrupted save (another job may still own it; delete it once none does)");
        }
      },
      rank == 0);

  // ~~~ collective write ~~~
  // Every collective HDF5 step is agreed (agreed_step): a rank whose write fails (a full disk, a quota) makes every
  // rank throw the same CheckpointError at the same point, the file is abandoned (Id::abandon) and the
  // partial temporary directory is removed; the previous checkpoint and the trackers are untouched.
  const std::string file_path = (fs::path(tmp_dir) / kFileName).string();
  WriteResult wrote;
  try {
    IoWatchdog dog(opts.io_timeout_s, str("saving iteration ", state.iteration, " to ", save_dir), log,
                   [rank, tmp_dir] {
                     if (rank == 0) remove_tree(tmp_dir, nullptr);
                   });
    wrote = write_file(file_path, cat, mine, rng, rng_sizes, state, groups, opts, dog, log);
    // Every rank flushes its own dirty pages (on a parallel file system each client holds some), then agree.
    run_agreed([&] { fsync_path(file_path); });
  } catch (const CheckpointError& e) {
    sleepy_barrier();  // every rank has left the file
    if (rank == 0) {
      std::string why;
      if (!remove_tree(tmp_dir, &why)) log.warn("checkpoint: could not remove ", tmp_dir, ": ", why);
    }
    throw save_failed(state.iteration, save_dir, e.what(),
                      str("nothing was published: the previous checkpoint and the tracker files are unchanged (check "
                          "the free space and quota of ",
                          save_dir, ")"));
  }

  // ~~~ publish: rename the directory, then point the trackers at it ~~~
  run_agreed(
      [&] {
        if (wrote.nonfinite > 0 && opts.keep_last > 0)
          log.warn("checkpoint: ", final_dir, " holds ", wrote.nonfinite,
                   " non-finite values (NaN or inf): --keep-last removes no older checkpoint");
        const int keep_last = wrote.nonfinite > 0 ? 0 : opts.keep_last;
        for (int64_t it : publish_checkpoint(save_dir, tmp_dir, state.iteration, job, keep_last))
          log.info("checkpoint: removed ", iteration_dir_name(it), " (--keep-last ", opts.keep_last, ")");
      },
      rank == 0);

  double bytes = static_cast<double>(wrote.my_bytes);
  MPI_Allreduce(MPI_IN_PLACE, &bytes, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log.info0("saved checkpoint ", final_dir, " (iteration ", state.iteration, ", ", cat.size(), " tensors, ",
            gigabytes(bytes), " in ", fixed(secs, 2), " s, ", fixed(bytes / 1e9 / std::max(secs, 1e-9), 2), " GB/s)");
  return final_dir;
}

}  // namespace megaton::checkpoint
