// build_train_valid_test_datasets: what `megaton train` calls (Megatron's gpt_dataset.build_train_valid_test_datasets,
// "mode 1": --data-path PREFIX or W1 P1 W2 P2 ..., --split; or BigScience's "mode 2":
// --train/valid/test-weighted-split-paths groups, data/weighted_split_paths.h). Global rank 0 builds any missing
// sample index first; every rank then loads the cached indices after `barrier()`.
//
//   auto sets = data::build_train_valid_test_datasets(cfg.data, seq, seed, {train_n, valid_n, test_n}, log, rank == 0,
//                                                     [&] { comm.barrier(); });
//   sets.train->get(i, tokens);   // seq+1 int64 tokens
#pragma once
#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/log.h"
#include "data/data_options.h"
#include "data/sample_dataset.h"

namespace megaton::data {

struct NamedDataset {
  std::string name;  // "" in mode 1; the group's NAME in mode 2
  std::shared_ptr<const SampleDataset> data;
};

struct TrainValidTestDatasets {
  std::shared_ptr<const SampleDataset> train, valid, test;  // null when the split is empty or 0 samples are asked
  // Every validation / test dataset: mode 1 one unnamed entry (when non-null), mode 2 one per group. `valid`/`test`
  // above are the first entry.
  std::vector<NamedDataset> valid_groups, test_groups;
};

/// Parses --data-path: one prefix (weight 1), or pairs "W1 P1 W2 P2 ..." (weights normalized). UsageError otherwise.
std::vector<std::pair<double, std::string>> parse_data_path(const std::vector<std::string>& data_path);

/// Megatron's per-component sample counts for a blend: ceil(n * w * 1.005).
std::array<int64_t, 3> blend_component_samples(const std::array<int64_t, 3>& samples, double weight);

/// `args` as DataOptions::validate accepted them (one data mode, each mode-2 flag inline or as a file, not both).
/// With a packed objective (DataOptions::packed) each prefix P names P_inputs_document and P_targets_document, packed
/// into rows of seq_length + 1 tokens padded with `pad_id` (data/packed_mtf_dataset.h).
TrainValidTestDatasets build_train_valid_test_datasets(const DataOptions& args, int seq_length, uint32_t seed,
                                                       const std::array<int64_t, 3>& num_samples, const Logger& log,
                                                       bool is_global_rank0, const std::function<void()>& barrier,
                                                       int64_t pad_id = -1);

}  // namespace megaton::data
