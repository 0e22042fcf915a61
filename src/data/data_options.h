// Where the training samples come from (Megatron's _add_data_args): mode 1, --data-path with --split (one prefix or
// a weighted blend), or BigScience's mode 2, named groups of dataset ranges (--*-weighted-split-paths); how sample
// indices are cached; how each sample's documents are masked; and what a sample trains (the objective, set by the
// command: pretrain_gpt.py, pretrain_prefix_lm.py, finetune_t0.py or finetune_t0_non_causal_decoder.py).
#pragma once
#include <string>
#include <vector>

namespace megaton::data {

/// What a sample trains (docs/finetuning.md).
enum class Objective {
  kCausalLm,            // megaton train: every token predicts the next, causally
  kPrefixLm,            // megaton pretrain-prefix-lm: a random prefix of each row (or document) attends both ways
  kPackedMtf,           // megaton finetune-t0: packed prompt pairs, causal within each pair
  kPackedMtfNonCausal,  // megaton finetune-t0-non-causal: packed prompt pairs, inputs attend both ways
};

/// The megaton command that trains `o`: "train", "pretrain-prefix-lm", "finetune-t0" or "finetune-t0-non-causal".
const char* objective_command(Objective o);

struct DataOptions {
  std::vector<std::string> data_path;  // PREFIX, or W1 PREFIX1 W2 PREFIX2 ...
  std::string split;                   // "" -> "969, 30, 1"
  std::string data_impl = "mmap";
  std::string data_cache_path;
  bool reset_position_ids = false;
  bool reset_attention_mask = false;
  bool eod_mask_loss = false;
  Objective objective = Objective::kCausalLm;
  bool loss_on_targets_only = false;       // prefix-LM: no loss on the prefix; finetune-t0: no loss on the inputs
  bool reweight_loss = false;              // --reweight-loss-based-on-position-frequency (prefix-LM)
  bool norm_target_loss = false;           // --norm-target-loss (packed prompts): each target's tokens weigh 1 in total
  bool mmap_warmup = false;                // read each dataset's files once before training (--mmap-warmup)
  std::string dataloader_type = "single";  // Megatron's sampler names; only "single" (in order) is implemented
  // Mode 2: groups "NAME: W1 S1:E1 P1, W2 S2:E2 P2" (data/weighted_split_paths.h); exclusive with data_path/split.
  // The *_path variants name a file holding the groups as double-quoted strings.
  std::vector<std::string> train_weighted_split_paths, valid_weighted_split_paths, test_weighted_split_paths;
  std::string train_weighted_split_paths_path, valid_weighted_split_paths_path, test_weighted_split_paths_path;

  /// Mode 1 against mode 2 exclusivity, one group per train flag, each mode-2 flag inline or as a file, the
  /// dataloader type. Group files are read when the datasets are built.
  void validate() const;
  /// The objective trains on packed prompt pairs (PREFIX_inputs_document / PREFIX_targets_document).
  bool packed() const { return objective == Objective::kPackedMtf || objective == Objective::kPackedMtfNonCausal; }
  /// Mode 2: --train-weighted-split-paths[-path] given.
  bool uses_weighted_split_paths() const;
};

}  // namespace megaton::data
