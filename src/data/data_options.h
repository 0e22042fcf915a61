// Where the training samples come from (Megatron's _add_data_args): mode 1, --data-path with --split (one prefix or
// a weighted blend), or BigScience's mode 2, named groups of dataset ranges (--*-weighted-split-paths); how sample
// indices are cached; and how each sample's documents are masked.
#pragma once
#include <string>
#include <vector>

namespace megaton::data {

struct DataOptions {
  std::vector<std::string> data_path;  // PREFIX, or W1 PREFIX1 W2 PREFIX2 ...
  std::string split;                   // "" -> "969, 30, 1"
  std::string data_impl = "mmap";
  std::string data_cache_path;
  bool reset_position_ids = false;
  bool reset_attention_mask = false;
  bool eod_mask_loss = false;
  bool mmap_warmup = false;                // read each dataset's files once before training (--mmap-warmup)
  std::string dataloader_type = "single";  // Megatron's sampler names; only "single" (in order) is implemented
  // Mode 2: groups "NAME: W1 S1:E1 P1, W2 S2:E2 P2" (data/weighted_split_paths.h); exclusive with data_path/split.
  // The *_path variants name a file holding the groups as double-quoted strings.
  std::vector<std::string> train_weighted_split_paths, valid_weighted_split_paths, test_weighted_split_paths;
  std::string train_weighted_split_paths_path, valid_weighted_split_paths_path, test_weighted_split_paths_path;

  /// Mode 1 against mode 2 exclusivity, one group per train flag, each mode-2 flag inline or as a file, the
  /// dataloader type. Group files are read when the datasets are built.
  void validate() const;
  /// Mode 2: --train-weighted-split-paths[-path] given.
  bool uses_weighted_split_paths() const;
};

}  // namespace megaton::data
