// megaton inspect CKPT: what a checkpoint holds (format, iteration, layout it was saved at, model config, training
// state, every tensor's dtype and global shape) and whether its data is intact (every CRC-32 re-computed).
#include <cstdio>
#include <iostream>
#include <set>

#include "checkpoint/file.h"
#include "checkpoint/load_path.h"
#include "checkpoint/placement.h"
#include "cli/parser.h"
#include "core/error.h"
#include "tools/subcommands.h"

namespace megaton::tools {

namespace po = boost::program_options;

namespace {
/// How many distinct tensors of `tensors` have a problem.
size_t bad_tensors(const std::vector<checkpoint::CheckpointFile::Problem>& problems, const nlohmann::json& tensors) {
  std::set<std::string> bad;
  for (const auto& p : problems)
    if (tensors.contains(p.path)) bad.insert(p.path);
  return bad.size();
}
}  // namespace

int run_inspect(int argc, const char* const* argv) {
  std::string path;
  bool no_verify = false, as_json = false, quiet = false;
  po::options_description d;
  d.add_options()("checkpoint", po::value(&path)->required(),
                  "a --save directory, an iter_NNNNNNN/ directory or its .h5 file")(
      "no-verify", po::bool_switch(&no_verify), "skip re-computing the CRC-32 of every tensor")(
      "json", po::bool_switch(&as_json), "print everything as one JSON object")(
      "quiet,q", po::bool_switch(&quiet), "print only the summary and problems, not every tensor");
  if (!cli::parse_args("inspect", "megaton inspect CKPT: list a checkpoint's tensors and metadata, verify checksums",
                       argc, argv, d, std::cout, "checkpoint"))
    return 0;
  const checkpoint::CheckpointFile f(checkpoint::resolve_checkpoint_path(path));
  std::vector<checkpoint::CheckpointFile::Problem> problems;
  if (!no_verify) problems = f.verify();

  int64_t total_bytes = 0, total_elems = 0;
  const auto& tensors = f.manifest()["tensors"];
  for (const auto& [p, rec] : tensors.items()) {
    int64_t n = 1;
    for (int64_t s : rec.at("shape").get<std::vector<int64_t>>()) n *= s;
    const std::string dt = rec.at("dtype").get<std::string>();
    const int64_t es = dt == "float64" || dt == "int64"   ? 8
                       : dt == "float32" || dt == "int32" ? 4
                       : dt == "uint8"                    ? 1
                                                          : 2;
    total_elems += n;
    total_bytes += n * es;
  }
  if (as_json) {
    nlohmann::json out = {
        {"file", f.path()},
        {"format_version", f.format_version()},
        {"iteration", f.iteration()},
        {"saved_layout",
         {{"tp", f.layout().tp}, {"pp", f.layout().pp}, {"dp", f.layout().dp}, {"world", f.layout().world}}},
        {"created_utc", f.attr("created_utc")},
        {"megaton_version", f.attr("megaton_version")},
        {"model_config", f.meta().model_config},
        {"state", f.meta().state},
        {"tensors", tensors},
        {"total_bytes", total_bytes},
        {"verified", !no_verify},
        {"problems", nlohmann::json::array()}};
    for (const auto& pr : problems) out["problems"].push_back({{"tensor", pr.path}, {"problem", pr.what}});
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << "file:            " << f.path() << "\n"
              << "format:          megaton-checkpoint v" << f.format_version() << " (megaton "
              << f.attr("megaton_version") << ", " << f.attr("created_utc") << ")\n"
              << "iteration:       " << (f.iteration() < 0 ? std::string("release") : std::to_string(f.iteration()))
              << "\n"
              << "saved at:        TP=" << f.layout().tp << " x PP=" << f.layout().pp << " x DP=" << f.layout().dp
              << " (world " << f.layout().world << ")\n"
              << "model config:    " << f.meta().model_config.dump() << "\n"
              << "training state:  " << f.meta().state.dump() << "\n";
    if (!quiet) {
      std::cout << "\n"
                << "tensor" << std::string(58, ' ') << "dtype      shape\n";
      for (const auto& [p, rec] : tensors.items()) {
        char line[512];
        std::snprintf(line, sizeof line, "%-64s %-10s %s", p.c_str(), rec.at("dtype").get<std::string>().c_str(),
                      checkpoint::shape_str(rec.at("shape").get<std::vector<int64_t>>()).c_str());
        std::cout << line << "\n";
      }
    }
    std::cout << "\n" << tensors.size() << " tensors, " << total_elems << " elements, " << total_bytes / 1e6 << " MB\n";
    if (no_verify)
      std::cout << "checksums:       not verified (--no-verify)\n";
    else
      std::cout << "checksums:       " << tensors.size() - bad_tensors(problems, tensors) << "/" << tensors.size()
                << " OK" << (f.has_meta_checksums() ? "" : " (metadata not covered: written by an older megaton)")
                << "\n";
    for (const auto& pr : problems) std::cout << "  PROBLEM " << pr.path << ": " << pr.what << "\n";
  }
  std::cout << std::flush;
  MEGATON_CHECK(problems.empty(), CheckpointError, f.path(), ": ", problems.size(), " problem(s) found, first: '",
                problems.empty() ? "" : problems[0].path, "': ", problems.empty() ? "" : problems[0].what);
  return 0;
}

}  // namespace megaton::tools
