#include "data/data_options.h"

#include "core/error.h"

namespace megaton::data {

const char* objective_command(Objective o) {
  switch (o) {
    case Objective::kCausalLm:
      return "train";
    case Objective::kPrefixLm:
      return "pretrain-prefix-lm";
    case Objective::kPackedMtf:
      return "finetune-t0";
    case Objective::kPackedMtfNonCausal:
      return "finetune-t0-non-causal";
  }
  return "train";
}

void DataOptions::validate() const {
  const DataOptions& d = *this;
  const bool mode2 = !d.train_weighted_split_paths.empty() || !d.train_weighted_split_paths_path.empty();
  const bool mode2_eval = !d.valid_weighted_split_paths.empty() || !d.valid_weighted_split_paths_path.empty() ||
                          !d.test_weighted_split_paths.empty() || !d.test_weighted_split_paths_path.empty();
  MEGATON_CHECK(!(mode2 && (!d.data_path.empty() || !d.split.empty())), UsageError,
                "--data-path/--split (mode 1) and --train-weighted-split-paths (mode 2) are exclusive");
  MEGATON_CHECK(mode2 || !mode2_eval, UsageError,
                "--valid/test-weighted-split-paths need --train-weighted-split-paths (mode 2), not --data-path");
  MEGATON_CHECK(d.train_weighted_split_paths.size() <= 1, UsageError,
                "--train-weighted-split-paths takes exactly one group (quote it: \"NAME: W S:E PREFIX, ...\"), got ",
                d.train_weighted_split_paths.size(), " values");
  MEGATON_CHECK(d.train_weighted_split_paths.empty() || d.train_weighted_split_paths_path.empty(), UsageError,
                "--train-weighted-split-paths and --train-weighted-split-paths-path are exclusive");
  MEGATON_CHECK(d.valid_weighted_split_paths.empty() || d.valid_weighted_split_paths_path.empty(), UsageError,
                "--valid-weighted-split-paths and --valid-weighted-split-paths-path are exclusive");
  MEGATON_CHECK(d.test_weighted_split_paths.empty() || d.test_weighted_split_paths_path.empty(), UsageError,
                "--test-weighted-split-paths and --test-weighted-split-paths-path are exclusive");
  MEGATON_CHECK(d.dataloader_type == "single", UsageError, "--dataloader-type: expected single, got '",
                d.dataloader_type,
                "' (cyclic, Megatron's per-epoch random sampler, is not implemented: the GPT dataset's shuffle index "
                "already orders the samples randomly)");
  MEGATON_CHECK(!(d.packed() && d.reset_attention_mask), UsageError,
                "--reset-attention-mask: packed prompt rows already confine attention to each prompt (its segment)");
}

bool DataOptions::uses_weighted_split_paths() const {
  return !train_weighted_split_paths.empty() || !train_weighted_split_paths_path.empty();
}

}  // namespace megaton::data
