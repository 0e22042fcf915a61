#include "data/dataset_builder.h"

#include <cmath>

#include "core/error.h"
#include "core/parse.h"
#include "core/timer.h"
#include "data/blended_dataset.h"
#include "data/gpt_dataset.h"
#include "data/indexed_dataset.h"
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

void warm_up_if_asked(const DataOptions& args, const MMapIndexedDataset& data, const Logger& log) {
  if (!args.mmap_warmup) return;
  Progress timer(0, "");
  const size_t bytes = data.warm_up();
  log.info0(" > warmed up ", data.prefix(), " (", bytes >> 20, " MiB read in ", timer.seconds(), " s)");
}

std::array<std::shared_ptr<const SampleDataset>, 3> build_for_prefix(const DataOptions& args, const std::string& prefix,
                                                                     int seq_length, uint32_t seed,
                                                                     const std::array<int64_t, 3>& num_samples,
                                                                     const Logger& log, bool build) {
  auto data = std::make_shared<const MMapIndexedDataset>(prefix);
  warm_up_if_asked(args, *data, log);
  const auto idx = split_boundaries(args.split, static_cast<int64_t>(data->size()));
  log.info0(" > ", prefix, ": ", data->size(), " documents, ", data->num_tokens(), " tokens; split [", idx[0], ", ",
            idx[1], ") [", idx[1], ", ", idx[2], ") [", idx[2], ", ", idx[3], ")");
  static const char* const kNames[3] = {"train", "valid", "test"};
  std::array<std::shared_ptr<const SampleDataset>, 3> out;
  for (int k = 0; k < 3; ++k) {
    if (idx[k + 1] <= idx[k] || num_samples[k] <= 0) continue;
    out[k] = std::make_shared<GptDataset>(kNames[k], data, idx[k], idx[k + 1], num_samples[k], seq_length, seed,
                                          GptIndexCache{args.data_cache_path, build}, log);
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
std::shared_ptr<const SampleDataset> build_group(const DataOptions& args, const WeightedSplitGroup& g, const char* kind,
                                                 int seq_length, uint32_t seed, int64_t samples, const Logger& log,
                                                 bool build) {
  std::vector<std::shared_ptr<const SampleDataset>> parts;
  std::vector<double> weights;
  for (const auto& p : g.parts) {
    auto data = std::make_shared<const MMapIndexedDataset>(p.prefix);
    warm_up_if_asked(args, *data, log);
    const auto [b, e] = split_by_range(p.start, p.end, static_cast<int64_t>(data->size()));
    MEGATON_CHECK(e > b, UsageError, "--", kind, "-weighted-split-paths group '", g.name, "': range ", p.start, ":",
                  p.end, " of ", p.prefix, " (", data->size(), " documents) holds no document");
    log.info0(" > ", kind, " group ", g.name, ": ", p.prefix, " documents [", b, ", ", e, ") weight ", p.weight);
    const int64_t n = g.parts.size() == 1 ? samples : blend_component_samples({samples, 0, 0}, p.weight)[0];
    parts.push_back(std::make_shared<GptDataset>(kind, data, b, e, n, seq_length, seed,
                                                 GptIndexCache{args.data_cache_path, build}, log));
    weights.push_back(p.weight);
  }
  if (parts.size() == 1) return parts.front();
  return std::make_shared<BlendedDataset>(parts, weights);
}

TrainValidTestDatasets build_weighted_split_paths(const DataOptions& args, int seq_length, uint32_t seed,
                                                  const std::array<int64_t, 3>& num_samples, const Logger& log,
                                                  bool build) {
  const auto train =
      groups_of(args.train_weighted_split_paths, args.train_weighted_split_paths_path, "--train-weighted-split-paths");
  // validate_data allows one inline group; a -path file may hold several.
  MEGATON_CHECK(train.size() == 1, UsageError, "--train-weighted-split-paths takes exactly one group, got ",
                train.size());
  TrainValidTestDatasets r;
  r.train = build_group(args, train[0], "train", seq_length, seed, num_samples[0], log, build);
  const auto valid =
      groups_of(args.valid_weighted_split_paths, args.valid_weighted_split_paths_path, "--valid-weighted-split-paths");
  const auto test =
      groups_of(args.test_weighted_split_paths, args.test_weighted_split_paths_path, "--test-weighted-split-paths");
  if (num_samples[1] > 0)
    for (const auto& g : valid)
      r.valid_groups.push_back({g.name, build_group(args, g, "valid", seq_length, seed, num_samples[1], log, build)});
  if (num_samples[2] > 0)
    for (const auto& g : test)
      r.test_groups.push_back({g.name, build_group(args, g, "test", seq_length, seed, num_samples[2], log, build)});
  if (!r.valid_groups.empty()) r.valid = r.valid_groups.front().data;
  if (!r.test_groups.empty()) r.test = r.test_groups.front().data;
  return r;
}

TrainValidTestDatasets build_data_path(const DataOptions& args, int seq_length, uint32_t seed,
                                       const std::array<int64_t, 3>& num_samples, const Logger& log, bool build) {
  const auto blend = parse_data_path(args.data_path);
  if (blend.size() == 1) {
    auto ds = build_for_prefix(args, blend[0].second, seq_length, seed, num_samples, log, build);
    return {ds[0], ds[1], ds[2]};
  }
  std::array<std::vector<std::shared_ptr<const SampleDataset>>, 3> parts;
  std::array<std::vector<double>, 3> weights;
  for (const auto& [w, prefix] : blend) {
    auto ds = build_for_prefix(args, prefix, seq_length, seed, blend_component_samples(num_samples, w), log, build);
    for (int k = 0; k < 3; ++k)
      if (ds[k]) parts[k].push_back(ds[k]), weights[k].push_back(w);
  }
  TrainValidTestDatasets r;
  std::shared_ptr<const SampleDataset>* slots[3] = {&r.train, &r.valid, &r.test};
  for (int k = 0; k < 3; ++k)
    if (!parts[k].empty()) *slots[k] = std::make_shared<BlendedDataset>(parts[k], weights[k]);
  return r;
}

TrainValidTestDatasets build_all(const DataOptions& args, int seq_length, uint32_t seed,
                                 const std::array<int64_t, 3>& num_samples, const Logger& log, bool build) {
  MEGATON_CHECK(args.data_impl == "mmap" || args.data_impl == "infer", UsageError, "--data-impl ", args.data_impl,
                " is not supported (mmap)");
  TrainValidTestDatasets r = args.uses_weighted_split_paths()
                                 ? build_weighted_split_paths(args, seq_length, seed, num_samples, log, build)
                                 : build_data_path(args, seq_length, seed, num_samples, log, build);
  if (r.valid_groups.empty() && r.valid) r.valid_groups.push_back({"", r.valid});
  if (r.test_groups.empty() && r.test) r.test_groups.push_back({"", r.test});
  return r;
}

}  // namespace

TrainValidTestDatasets build_train_valid_test_datasets(const DataOptions& args, int seq_length, uint32_t seed,
                                                       const std::array<int64_t, 3>& num_samples, const Logger& log,
                                                       bool is_global_rank0, const std::function<void()>& barrier) {
  // Rank 0 builds (and loads) first; the others wait, then load the files rank 0 wrote. An exception on rank 0 is
  // raised there and aborts the job (main), so nobody waits forever.
  TrainValidTestDatasets r;
  if (is_global_rank0) r = build_all(args, seq_length, seed, num_samples, log, true);
  if (barrier) barrier();
  if (!is_global_rank0) r = build_all(args, seq_length, seed, num_samples, log, false);
  return r;
}

}  // namespace megaton::data
