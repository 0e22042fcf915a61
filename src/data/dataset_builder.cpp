#include "data/dataset_builder.h"

#include <cmath>

#include "core/error.h"
#include "core/parse.h"
#include "core/timer.h"
#include "data/blended_dataset.h"
#include "data/gpt_dataset.h"
#include "data/indexed_dataset.h"
#include "data/packed_mtf_dataset.h"
#include "data/split.h"
#include "data/weighted_split_paths.h"

namespace megaton::data {

std::vector<std::pair<double, std::string>> parse_data_path(const std::vector<std::string>& p) {
  MEGATON_CHECK(!p.empty(), UsageError, "--data-path is required (a dataset prefix, or W1 P1 W2 P2 ... to blend)");
  if (p.size() == 1) return {{1.0, p[0]}};
  MEGATON_CHECK(p.size() % 2 == 0, UsageError, "--data-path with ", p.size(),
                " values: to blend, give weight/prefix pairs 'W1 P1 W2 P2 ...'");
  std::vector<std::pair<double, std::string>> out;
  double sum = 0;
  for (size_t i = 0; i < p.size(); i += 2) {
    const auto w = parse_double(p[i]);
    MEGATON_CHECK(w && *w >= 0 && std::isfinite(*w), UsageError, "--data-path: '", p[i], "' (value ", i + 1,
                  ") should be a non-negative blend weight before prefix '", p[i + 1], "'");
    out.emplace_back(*w, p[i + 1]);
    sum += *w;
  }
  MEGATON_CHECK(sum > 0, UsageError, "--data-path: the blend weights sum to 0");
  for (auto& [w, prefix] : out) w /= sum;
  return out;
}

std::array<int64_t, 3> blend_component_samples(const std::array<int64_t, 3>& samples, double weight) {
  std::array<int64_t, 3> r{};
  for (int k = 0; k < 3; ++k) r[k] = static_cast<int64_t>(std::ceil(double(samples[k]) * weight * 1.005));
  return r;
}

namespace {

// What every split's dataset is built with.
struct Build {
  const DataOptions& args;
  int seq_length;
  uint32_t seed;
  int64_t pad_id;  // packed objectives: the padding token
  const Logger& log;
  bool build;  // global rank 0: build missing index files
};

std::shared_ptr<const MMapIndexedDataset> open_dataset(const Build& c, const std::string& path) {
  auto data = std::make_shared<const MMapIndexedDataset>(path);
  if (c.args.mmap_warmup) {
    Progress timer(0, "");
    const size_t bytes = data->warm_up();
    c.log.info0(" > warmed up ", data->prefix(), " (", bytes >> 20, " MiB read in ", timer.seconds(), " s)");
  }
  return data;
}

// A prefix's documents: one indexed dataset, or for the packed objectives the aligned PREFIX_inputs_document and
// PREFIX_targets_document (the fork's names; `megaton preprocess --json-keys inputs targets` writes them).
struct PrefixData {
  std::shared_ptr<const MMapIndexedDataset> tokens, inputs, targets;
  int64_t documents() const { return static_cast<int64_t>((tokens ? tokens : targets)->size()); }
  std::string describe() const {
    if (tokens) return str(tokens->prefix(), ": ", tokens->size(), " documents, ", tokens->num_tokens(), " tokens");
    return str(inputs->prefix(), " + ", targets->prefix(), ": ", targets->size(), " prompt pairs, ",
               inputs->num_tokens(), " + ", targets->num_tokens(), " tokens");
  }
};

PrefixData open_prefix(const Build& c, const std::string& prefix) {
  PrefixData d;
  if (!c.args.packed()) {
    d.tokens = open_dataset(c, prefix);
    return d;
  }
  d.inputs = open_dataset(c, prefix + "_inputs_document");
  d.targets = open_dataset(c, prefix + "_targets_document");
  return d;
}

// One split's dataset over documents [b, e) of `d`: fixed-length samples, or packed prompt rows.
std::shared_ptr<const SampleDataset> make_split(const Build& c, const PrefixData& d, const char* name, int64_t b,
                                                int64_t e, int64_t samples) {
  const GptIndexCache cache{c.args.data_cache_path, c.build};
  if (d.tokens) return std::make_shared<GptDataset>(name, d.tokens, b, e, samples, c.seq_length, c.seed, cache, c.log);
  return std::make_shared<PackedMtfDataset>(name, d.inputs, d.targets, b, e, samples, int64_t{c.seq_length} + 1, c.seed,
                                            c.pad_id, cache, c.log);
}

std::array<std::shared_ptr<const SampleDataset>, 3> build_for_prefix(const Build& c, const std::string& prefix,
                                                                     const std::array<int64_t, 3>& num_samples) {
  const PrefixData data = open_prefix(c, prefix);
  const auto idx = split_boundaries(c.args.split, data.documents());
  c.log.info0(" > ", data.describe(), "; split [", idx[0], ", ", idx[1], ") [", idx[1], ", ", idx[2], ") [", idx[2],
              ", ", idx[3], ")");
  static const char* const kNames[3] = {"train", "valid", "test"};
  std::array<std::shared_ptr<const SampleDataset>, 3> out;
  for (int k = 0; k < 3; ++k) {
    if (idx[k + 1] <= idx[k] || num_samples[k] <= 0) continue;
    out[k] = make_split(c, data, kNames[k], idx[k], idx[k + 1], num_samples[k]);
  }
  return out;
}

// The groups of one mode-2 flag, inline or read from its -path file (DataOptions::validate let only one of them
// through).
std::vector<WeightedSplitGroup> groups_of(const std::vector<std::string>& inline_groups, const std::string& file,
                                          const std::string& flag) {
  const auto texts = file.empty() ? inline_groups : read_weighted_split_paths_file(file, flag + "-path");
  std::vector<WeightedSplitGroup> out;
  for (const auto& t : texts) out.push_back(parse_weighted_split_group(t, flag));
  return out;
}

// One mode-2 group: its datasets restricted to their document ranges, blended by weight.
std::shared_ptr<const SampleDataset> build_group(const Build& c, const WeightedSplitGroup& g, const char* kind,
                                                 int64_t samples) {
  std::vector<std::shared_ptr<const SampleDataset>> parts;
  std::vector<double> weights;
  for (const auto& p : g.parts) {
    const PrefixData data = open_prefix(c, p.prefix);
    const auto [b, e] = split_by_range(p.start, p.end, data.documents());
    MEGATON_CHECK(e > b, UsageError, "--", kind, "-weighted-split-paths group '", g.name, "': range ", p.start, ":",
                  p.end, " of ", p.prefix, " (", data.documents(), " documents) holds no document");
    c.log.info0(" > ", kind, " group ", g.name, ": ", p.prefix, " documents [", b, ", ", e, ") weight ", p.weight);
    const int64_t n = g.parts.size() == 1 ? samples : blend_component_samples({samples, 0, 0}, p.weight)[0];
    parts.push_back(make_split(c, data, kind, b, e, n));
    weights.push_back(p.weight);
  }
  if (parts.size() == 1) return parts.front();
  return std::make_shared<BlendedDataset>(parts, weights);
}

TrainValidTestDatasets build_weighted_split_paths(const Build& c, const std::array<int64_t, 3>& num_samples) {
  const DataOptions& args = c.args;
  const auto train =
      groups_of(args.train_weighted_split_paths, args.train_weighted_split_paths_path, "--train-weighted-split-paths");
  // validate_data allows one inline group; a -path file may hold several.
  MEGATON_CHECK(train.size() == 1, UsageError, "--train-weighted-split-paths takes exactly one group, got ",
                train.size());
  TrainValidTestDatasets r;
  r.train = build_group(c, train[0], "train", num_samples[0]);
  const auto valid =
      groups_of(args.valid_weighted_split_paths, args.valid_weighted_split_paths_path, "--valid-weighted-split-paths");
  const auto test =
      groups_of(args.test_weighted_split_paths, args.test_weighted_split_paths_path, "--test-weighted-split-paths");
  if (num_samples[1] > 0)
    for (const auto& g : valid) r.valid_groups.push_back({g.name, build_group(c, g, "valid", num_samples[1])});
  if (num_samples[2] > 0)
    for (const auto& g : test) r.test_groups.push_back({g.name, build_group(c, g, "test", num_samples[2])});
  if (!r.valid_groups.empty()) r.valid = r.valid_groups.front().data;
  if (!r.test_groups.empty()) r.test = r.test_groups.front().data;
  return r;
}

TrainValidTestDatasets build_data_path(const Build& c, const std::array<int64_t, 3>& num_samples) {
  const auto blend = parse_data_path(c.args.data_path);
  if (blend.size() == 1) {
    auto ds = build_for_prefix(c, blend[0].second, num_samples);
    return {ds[0], ds[1], ds[2]};
  }
  std::array<std::vector<std::shared_ptr<const SampleDataset>>, 3> parts;
  std::array<std::vector<double>, 3> weights;
  for (const auto& [w, prefix] : blend) {
    auto ds = build_for_prefix(c, prefix, blend_component_samples(num_samples, w));
    for (int k = 0; k < 3; ++k)
      if (ds[k]) parts[k].push_back(ds[k]), weights[k].push_back(w);
  }
  TrainValidTestDatasets r;
  std::shared_ptr<const SampleDataset>* slots[3] = {&r.train, &r.valid, &r.test};
  for (int k = 0; k < 3; ++k)
    if (!parts[k].empty()) *slots[k] = std::make_shared<BlendedDataset>(parts[k], weights[k]);
  return r;
}

TrainValidTestDatasets build_all(const Build& c, const std::array<int64_t, 3>& num_samples) {
  MEGATON_CHECK(c.args.data_impl == "mmap" || c.args.data_impl == "infer", UsageError, "--data-impl ", c.args.data_impl,
                " is not supported (mmap)");
  MEGATON_CHECK(!c.args.packed() || c.pad_id >= 0, InternalError, "packed prompt rows without a padding id");
  TrainValidTestDatasets r =
      c.args.uses_weighted_split_paths() ? build_weighted_split_paths(c, num_samples) : build_data_path(c, num_samples);
  if (r.valid_groups.empty() && r.valid) r.valid_groups.push_back({"", r.valid});
  if (r.test_groups.empty() && r.test) r.test_groups.push_back({"", r.test});
  return r;
}

}  // namespace

TrainValidTestDatasets build_train_valid_test_datasets(const DataOptions& args, int seq_length, uint32_t seed,
                                                       const std::array<int64_t, 3>& num_samples, const Logger& log,
                                                       bool is_global_rank0, const std::function<void()>& barrier,
                                                       int64_t pad_id) {
  // Rank 0 builds (and loads) first; the others wait, then load the files rank 0 wrote. An exception on rank 0 is
  // raised there and aborts the job (main), so nobody waits forever.
  TrainValidTestDatasets r;
  if (is_global_rank0) r = build_all({args, seq_length, seed, pad_id, log, true}, num_samples);
  if (barrier) barrier();
  if (!is_global_rank0) r = build_all({args, seq_length, seed, pad_id, log, false}, num_samples);
  return r;
}

}  // namespace megaton::data
