// load_checkpoint: resolves the iteration, checks the file (format, completeness, config, every tensor's presence and
// shape), reads each rank's hyperslabs into its local shards, and verifies the checksums collectively.
#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>

#include "checkpoint/checkpoint.h"
#include "checkpoint/collective.h"
#include "checkpoint/crc.h"
#include "checkpoint/foreign_import.h"
#include "checkpoint/format.h"
#include "checkpoint/h5.h"
#include "checkpoint/meta_checksums.h"
#include "checkpoint/readahead.h"
#include "checkpoint/sections.h"
#include "checkpoint/tracker.h"
#include "core/error.h"
#include "core/format.h"
#include "core/timer.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace megaton::checkpoint {

namespace {

json parse_json(const std::string& text, const std::string& where) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw CheckpointError(str(where, ": not valid JSON (", e.what(), ")"));
  }
}

/// One host buffer that the loader's reads reuse, grown to the largest read: a new buffer per dataset would have the
/// kernel fault in and zero every page of it first (a second pass over each tensor's bytes).
class ReadBuffer {
 public:
  /// A CPU tensor of `shape` and `dtype` over the buffer; valid until the next take().
  torch::Tensor take(const std::vector<int64_t>& shape, torch::ScalarType dtype) {
    const int64_t numel = c10::multiply_integers(shape), bytes = numel * int64_t(c10::elementSize(dtype));
    if (bytes_.numel() < bytes) {
      bytes_ = torch::Tensor();  // (the old one goes first)
      bytes_ = torch::empty({bytes}, torch::TensorOptions().dtype(torch::kUInt8));
    }
    return bytes_.narrow(0, 0, bytes).view(dtype).view(shape);
  }

 private:
  torch::Tensor bytes_;  // uint8 [capacity]
};

/// Reads `box` of dataset `path` as `dtype` (stored dtype) into a CPU tensor, from `scratch` when given (then valid
/// until its next use) or new; `want` false: takes part in a collective read with an empty selection and returns an
/// undefined tensor.
torch::Tensor read_box(hid_t file, const std::string& path, const Box& box, torch::ScalarType dtype, bool want,
                       hid_t xfer, bool collective, ReadBuffer* scratch = nullptr) {
  if (!want && !collective) return {};
  h5::Id ds = h5::open_dataset(file, path);
  h5::Id fspace(h5::check_id(H5Dget_space(ds), "H5Dget_space"), H5Sclose);
  torch::Tensor buf;
  if (want && !box.empty()) {
    buf = scratch != nullptr ? scratch->take(box.count, dtype)
                             : torch::empty(box.count, torch::TensorOptions().dtype(dtype));
    h5::select_box(fspace, box.offset, box.count);
  } else {
    h5::select_none(fspace);
  }
  h5::Id mspace = h5::make_space(buf.defined() ? box.count : std::vector<int64_t>{1});
  if (!buf.defined()) h5::select_none(mspace);
  char dummy = 0;
  h5::check(H5Dread(ds, h5::mem_type(dtype), mspace, fspace, xfer, buf.defined() ? buf.data_ptr() : &dummy),
            str("reading '", path, "'"));
  if (want && !buf.defined()) buf = torch::empty(box.count, torch::TensorOptions().dtype(dtype));
  return want ? buf : torch::Tensor();
}

/// Copies `src` (the rows of `slab`) into the matching rows of the local shard `dst`.
void copy_rows(torch::Tensor& dst, const RowSlab& slab, const torch::Tensor& src) {
  torch::NoGradGuard ng;
  if (dst.dim() == 0) {
    dst.copy_(src.reshape({}));
    return;
  }
  if (slab.box.count[0] == 0) return;
  dst.narrow(0, slab.local_row_begin, slab.box.count[0]).copy_(src);
}

std::string describe_layout(const SavedLayout& l) {
  return str("TP=", l.tp, " x PP=", l.pp, " x DP=", l.dp, " (world ", l.world, ")");
}

}  // namespace

std::optional<LoadResult> load_checkpoint(const std::string& load_arg, parallel::ParamList& model, OptimState* optim,
                                          RngState* rng, const dist::ProcessGroups& groups, const LoadOptions& opts,
                                          const Logger& log) {
  MEGATON_ASSERT(groups.grid.world() == world_size(), "checkpoint I/O spans MPI_COMM_WORLD (", world_size(),
                 " ranks) but the process groups span ", groups.grid.world());
  const auto t0 = std::chrono::steady_clock::now();
  const dist::Coords me = groups.coords;
  const int tp = groups.grid.tp_size();
  const int rank = world_rank();

  // ~~~ a Megatron-DeepSpeed checkpoint: rank 0 converts it (once) into a megaton one beside it ~~~
  std::string converted;
  run_agreed([&] { converted = megaton_load_dir(load_arg, log); }, rank == 0);
  const std::string load_dir = broadcast_string(converted);

  // ~~~ which file ~~~
  std::string which;  // "none" or the iteration
  run_agreed(
      [&] {
        std::string disagree;
        std::optional<int64_t> it = opts.iteration ? opts.iteration : read_latest_iteration(load_dir, &disagree);
        if (!disagree.empty()) log.warn("checkpoint: ", disagree);
        if (!it) {
          which = "none";
          return;
        }
        const std::string f = checkpoint_file(load_dir, *it);
        if (!fs::exists(f))
          throw CheckpointError(str("--load ", load_dir, ": ", opts.iteration ? "the requested" : "the tracker's",
                                    " iteration ", *it, " has no file ", f,
                                    fs::exists(fs::path(f).parent_path()) ? "" : " (the directory is missing)"));
        which = std::to_string(*it);
      },
      rank == 0);
  which = broadcast_string(which);
  if (which == "none") {
    log.warn0("--load ", load_dir, ": no '", kTrackerFile, "' or '", kMegatronTrackerFile,
              "' tracker file; starting from scratch");
    return std::nullopt;
  }
  LoadResult res;
  res.saved_iteration = std::stoll(which);
  res.path = checkpoint_file(load_dir, res.saved_iteration);
  const std::string& fp = res.path;

  // ~~~ open and check the metadata (identical on every rank, so every rank throws alike) ~~~
  h5::Id file = h5::open_file_parallel(fp, MPI_COMM_WORLD, opts.collective_io);
  const std::string fmt = h5::read_attr_string(file, "format", fp);
  MEGATON_CHECK(fmt == kFormatName, CheckpointError, fp, ": format '", fmt, "' is not '", kFormatName, "'");
  const int64_t version = h5::read_attr_int(file, "format_version", fp);
  MEGATON_CHECK(version >= 1 && version <= kFormatVersion, CheckpointError, fp, ": format version ", version,
                " is not supported by this megaton (reads versions 1..", kFormatVersion, ")");
  MEGATON_CHECK(h5::has_attr(file, "complete") && h5::read_attr_int(file, "complete", fp) == 1, CheckpointError, fp,
                ": incomplete checkpoint (the save did not finish)");
  const int64_t file_iter = h5::read_attr_int(file, "iteration", fp);
  MEGATON_CHECK(file_iter == res.saved_iteration, CheckpointError, fp, ": holds iteration ", file_iter,
                " but sits in the directory of iteration ", res.saved_iteration);
  MetaBlobs meta = read_meta_blobs(file, fp);
  auto& blobs = meta.text;
  if (opts.verify_checksums && !meta.checksums.empty()) {
    const auto bad = meta_checksum_mismatches(blobs, meta.checksums, fp);
    MEGATON_CHECK(bad.empty(), CheckpointError, fp, ": the metadata fails verification (edited or damaged; ",
                  "`megaton inspect` lists it): ", bad.front());
  }
  const json manifest = parse_json(blobs["manifest.json"], fp + " manifest");
  validate_manifest(manifest, fp);
  const json& mt = manifest.at("tensors");
  res.meta.iteration = res.saved_iteration;
  res.meta.state = parse_json(blobs["state.json"], fp + " state.json");
  res.meta.model_config = parse_json(blobs["model_config.json"], fp + " model_config.json");
  res.meta.args = parse_json(blobs["args.json"], fp + " args.json");
  const json layout = parse_json(blobs["layout.json"], fp + " layout.json");
  try {
    res.saved_layout = SavedLayout{layout.at("tp").get<int>(), layout.at("pp").get<int>(), layout.at("dp").get<int>(),
                                   layout.at("world").get<int>()};
  } catch (const json::exception& e) {
    throw CheckpointError(str(fp, ": meta/layout.json is malformed (", e.what(), ")"));
  }
  const SavedLayout now{tp, groups.grid.pp_size(), groups.grid.dp_size(), groups.grid.world()};

  // Architecture.
  std::string mismatch;
  for (const auto& [k, v] : opts.expected_model_config.items()) {
    if (!res.meta.model_config.contains(k)) continue;
    if (res.meta.model_config[k] != v)
      mismatch += str("\n  ", k, ": checkpoint has ", res.meta.model_config[k].dump(), ", this run has ", v.dump());
  }
  MEGATON_CHECK(mismatch.empty(), CheckpointError, fp,
                ": the model configuration does not match the checkpoint:", mismatch);

  // ~~~ what to read ~~~
  const bool want_optim = optim && opts.load_optim && !opts.finetune;
  std::set<std::string> states;  // optimizer states present in the file
  for (const auto& [path, rec] : mt.items()) {
    if (path.rfind(str(kOptimSection, "/"), 0) != 0) continue;
    const size_t a = std::strlen(kOptimSection) + 1, b = path.find('/', a);
    if (b != std::string::npos) states.insert(path.substr(a, b - a));
  }
  if (want_optim)
    MEGATON_CHECK(!states.empty(), CheckpointError, fp,
                  ": has no optimizer state (saved with --no-save-optim?); pass --no-load-optim or --finetune");
  std::vector<LocalTensor> local = model_tensors(model, me.tp, tp);
  if (want_optim) {
    for (const auto& s : states)
      for (const auto& p : model) {
        torch::Tensor& t = (*optim)[s][p.name];
        if (t.defined()) continue;
        const std::string path = optim_path(s, p.name);  // a missing one is reported with the others below
        const auto dtype = mt.contains(path) ? dtype_from_name(mt[path].value("dtype", ""), str(fp, " '", path, "'"))
                                             : torch::kFloat32;
        t = torch::zeros(p.param.sizes(), torch::TensorOptions().dtype(dtype).device(p.param.device()));
      }
    auto o = optim_tensors(model, *optim, me.tp, tp);
    local.insert(local.end(), o.begin(), o.end());
  }
  const Catalog cat = gather_catalog(local, groups.grid, me);

  // Presence and shapes, and (strict) nothing left unused.
  std::string problems;
  int nproblems = 0;
  auto problem = [&](const std::string& s) {
    if (++nproblems <= 12) problems += "\n  " + s;
  };
  for (const auto& [path, e] : cat) {
    const ShardPlacement pl = place(e, 0, tp);
    if (!mt.contains(path)) {
      problem(str("'", path, "' ", shape_str(pl.main.dataset_shape), " is missing from the checkpoint"));
      continue;
    }
    const auto shape = mt[path].at("shape").get<std::vector<int64_t>>();
    if (shape != pl.main.dataset_shape)
      problem(str("'", path, "': checkpoint has shape ", shape_str(shape), ", the model needs ",
                  shape_str(pl.main.dataset_shape), e.unpadded_rows > 0 ? " (rows without vocabulary padding)" : ""));
  }
  for (const auto& [path, rec] : mt.items()) {
    if (rec.contains("role")) continue;  // padding rows
    const bool is_model = path.rfind(str(kModelSection, "/"), 0) == 0;
    const bool is_optim = path.rfind(str(kOptimSection, "/"), 0) == 0;
    if (opts.strict && ((is_model) || (is_optim && want_optim)) && !cat.count(path))
      problem(str("'", path, "' is in the checkpoint but not in the model (a different architecture?)"));
  }
  if (nproblems > 12) problems += str("\n  ... and ", nproblems - 12, " more");
  MEGATON_CHECK(problems.empty(), CheckpointError, fp, " (saved at ", describe_layout(res.saved_layout),
                ") does not fit the model at ", describe_layout(now), ":", problems);

  // ~~~ read ~~~
  std::map<std::string, const LocalTensor*> mine;
  for (const auto& t : local) mine[t.path] = &t;
  std::vector<std::string> verified;  // dataset paths, in order of `partials`
  std::vector<uint32_t> partials;
  std::vector<uint32_t> expected;
  int64_t my_bytes = 0;
  h5::Id xfer = h5::transfer_plist(true, opts.collective_io);
  double total_bytes = 0, done = 0;
  for (const auto& [path, e] : cat) total_bytes += static_cast<double>(catalog_entry_bytes(e));
  Progress shown(total_bytes, "GB", 1e9);  // rank 0 reports every rank's reads together
  // The bytes of each dataset this rank reads, in the order it reads them, for the read-ahead thread.
  std::vector<ByteRange> ahead;
  std::map<std::string, size_t> ahead_index;
  for (const auto& [path, e] : cat) {
    if (!mine.count(path)) continue;
    const ShardPlacement pl = place(e, me.tp, tp);
    const int64_t element = c10::elementSize(dtype_from_name(mt.at(path).at("dtype").get<std::string>(), path));
    if (const auto span = dataset_span(file, path, pl.main.box.offset, pl.main.box.count, element)) {
      ahead_index[path] = ahead.size();
      ahead.push_back(*span);
    }
  }
  Readahead readahead(fp, std::move(ahead), opts.readahead_bytes);
  ReadBuffer scratch;  // the tensors' reads (each checksummed and copied into place before the next)
  run_agreed([&] {
    for (auto entry = cat.begin(); entry != cat.end(); ++entry) {
      const auto& [path, e] = *entry;
      if (shown.due(opts.progress_every_s)) log.info0("checkpoint: loading ", fp, ": ", shown.line(done));
      done += static_cast<double>(catalog_entry_bytes(e));
      const ShardPlacement pl = place(e, me.tp, tp);
      auto it = mine.find(path);
      const bool have = it != mine.end();
      const bool designated = have && is_designated(e, me);
      const auto& rec = mt.at(path);
      const torch::ScalarType stored = dtype_from_name(rec.at("dtype").get<std::string>(), str(fp, " '", path, "'"));
      torch::Tensor dst = have ? it->second->tensor : torch::Tensor();
      if (const auto a = ahead_index.find(path); a != ahead_index.end()) readahead.reached(a->second);
      torch::Tensor buf = read_box(file, path, pl.main.box, stored, have, xfer, opts.collective_io, &scratch);
      uint32_t part = 0;
      if (have) {
        if (designated && opts.verify_checksums)
          part = crc32_partial(buf.data_ptr(), pl.main.dataset_shape, pl.main.box, buf.element_size());
        copy_rows(dst, pl.main, buf);
        if (designated) my_bytes += buf.numel() * buf.element_size();
      }
      verified.push_back(path);
      partials.push_back(part);
      expected.push_back(rec.at("crc32").get<uint32_t>());
      if (!pl.has_padding) continue;
      // Padding rows: restored when the checkpoint was padded to the same size, else zero.
      const std::string ppath = path + kPaddingSuffix;
      const bool same_padding = rec.value("padded_rows", int64_t{-1}) == e.global_shape[0] && mt.contains(ppath);
      if (same_padding) {
        torch::Tensor pbuf = read_box(file, ppath, pl.padding.box, stored, have, xfer, opts.collective_io, &scratch);
        uint32_t ppart = 0;
        if (have) {
          if (designated && opts.verify_checksums)
            ppart = crc32_partial(pbuf.data_ptr(), pl.padding.dataset_shape, pl.padding.box, pbuf.element_size());
          copy_rows(dst, pl.padding, pbuf);
        }
        verified.push_back(ppath);
        partials.push_back(ppart);
        expected.push_back(mt.at(ppath).at("crc32").get<uint32_t>());
      } else if (have && pl.padding.box.count[0] > 0) {
        torch::NoGradGuard ng;
        dst.narrow(0, pl.padding.local_row_begin, pl.padding.box.count[0]).zero_();
      }
    }
  });

  // RNG: only meaningful at the same layout (one state per global rank).
  const bool want_rng = rng && opts.load_rng && !opts.finetune;
  if (want_rng) {
    std::vector<std::string> names;
    for (const auto& [path, rec] : mt.items())
      if (path.rfind(str(kRngSection, "/"), 0) == 0) names.push_back(path.substr(std::strlen(kRngSection) + 1));
    if (names.empty()) {
      log.warn0(fp, ": no RNG state saved (--no-save-rng?); random generators keep their current state");
    } else if (!(res.saved_layout == now)) {
      log.warn0(fp, ": RNG states not restored: saved at ", describe_layout(res.saved_layout), ", loading at ",
                describe_layout(now));
    } else {
      run_agreed([&] {
        for (const auto& name : names) {
          const std::string path = rng_path(name);
          const auto shape = mt.at(path).at("shape").get<std::vector<int64_t>>();
          MEGATON_CHECK(shape.size() == 2 && shape[0] == now.world, CheckpointError, fp, " '", path, "': shape ",
                        shape_str(shape), " does not hold one row per rank of ", now.world);
          const Box box{{rank, 0}, {1, shape[1]}};
          torch::Tensor buf = read_box(file, path, box, torch::kUInt8, true, xfer, opts.collective_io);
          partials.push_back(opts.verify_checksums ? crc32_partial(buf.data_ptr(), shape, box, 1) : 0);
          verified.push_back(path);
          expected.push_back(mt.at(path).at("crc32").get<uint32_t>());
          (*rng)[name] = buf.reshape({-1});
        }
      });
      res.rng_loaded = true;
    }
  }

  // ~~~ checksums ~~~
  if (opts.verify_checksums) {
    allreduce_xor(partials);
    std::string bad;
    int nbad = 0;
    for (size_t i = 0; i < partials.size(); ++i)
      if (partials[i] != expected[i] && ++nbad <= 8)
        bad += str("\n  '", verified[i], "': stored crc32 ", expected[i], ", data gives ", partials[i]);
    MEGATON_CHECK(nbad == 0, CheckpointError, fp, ": checksum mismatch in ", nbad,
                  " tensor(s); the file is corrupt:", bad);
  }
  file.close(str(fp, ": close"));

  res.optim_loaded = want_optim;
  res.iteration = opts.finetune ? 0 : res.saved_iteration;
  if (opts.finetune) res.meta.state = json::object();
  double bytes = static_cast<double>(my_bytes);
  MPI_Allreduce(MPI_IN_PLACE, &bytes, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log.info0("loaded checkpoint ", fp, " (iteration ", res.saved_iteration, ", saved at ",
            describe_layout(res.saved_layout), ", ", gigabytes(bytes), " in ", fixed(secs, 2), " s",
            want_optim ? "" : ", without optimizer state", opts.finetune ? ", --finetune: iteration reset to 0" : "",
            ")");
  return res;
}

}  // namespace megaton::checkpoint
