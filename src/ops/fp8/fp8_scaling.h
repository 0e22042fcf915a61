// Per-tensor FP8 scaling (Transformer Engine's recipes, under Megatron-Core's flag names).
//
// Every FP8 tensor of the model (a linear layer's input, weight and output gradient) has a slot in one ScalingTable:
// its scale (FP8 value = round(x * scale)), the scale's inverse (what the GEMM multiplies back by) and, for the delayed
// recipe, a history of the tensor's absolute maxima (amax). Slots are laid out as columns, so one step of the recipe
// and one reduction across ranks cover the whole model.
//
// delayed (--fp8-recipe delayed, the default): a cast uses the slot's current scale and records the tensor's amax in
// the history's row 0 (the maximum over the micro-batches of the iteration). update(), once per iteration after the
// backward, per slot:
//     amax  = row 0 (--fp8-amax-compute-algo most_recent) or the maximum of all rows (max)
//     scale = format_max / 2^margin / amax, kept unchanged when amax is 0 or not finite
//     scale_inv = 1 / scale
//     the history rolls: row 0 becomes 0 for the next iteration, row 0's amax moves to the last row and the
//     others move up a row (the oldest is dropped), as Transformer Engine's amax_and_scale_update.
// tensorwise (current scaling): a cast takes its scale from the tensor's own amax just before it (current_scale);
// the table only keeps the last scales for inspection.
// Under TP (and DP where the recipe reduces over it), reduce_amax() takes the maximum of row 0 over the group before
// update(), so every rank holding a shard of one tensor uses one scale.
#pragma once
#include <torch/torch.h>

#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "ops/fp8/fp8_format.h"

namespace megaton::ops::fp8 {

/// Megatron-Core's FP8 flags.
struct Fp8Options {
  std::string format;                             // --fp8-format: "" (off) | e4m3 | hybrid
  std::string recipe = "delayed";                 // --fp8-recipe: delayed | tensorwise
  int margin = 0;                                 // --fp8-margin
  int amax_history_len = 1;                       // --fp8-amax-history-len
  std::string amax_compute_algo = "most_recent";  // --fp8-amax-compute-algo: most_recent | max
  bool wgrad = true;                              // --fp8-wgrad (default) / --no-fp8-wgrad: weight-gradient GEMM
  // --no-fp8-cast-fusion (megaton's): false casts in passes of their own (for A/B timing); the same values but for
  // the MLP activation's rounding (ops/fp8/fp8_mlp.h)
  bool fused_casts = true;

  bool enabled() const { return !format.empty(); }
  bool delayed() const { return recipe == "delayed"; }
  /// Activations and weights: E4M3 in both formats.
  Format forward_format() const { return Format::kE4M3; }
  /// Output gradients: E5M2 under hybrid, E4M3 under e4m3.
  Format backward_format() const { return format == "hybrid" ? Format::kE5M2 : Format::kE4M3; }
  /// UsageError naming the flag for a value outside its choices.
  void validate() const;
};

/// The scale for a tensor of absolute maximum `amax` in format `f`: format_max / 2^margin / amax, or `fallback` when
/// amax is 0 or not finite.
float scale_for_amax(float amax, Format f, int margin, float fallback = 1.0f);

class ScalingTable {
 public:
  ScalingTable(Fp8Options options, torch::Device device);

  /// The slot of `name` (a tensor's canonical name and role, e.g. "layers.3.mlp.fc1.weight:weight"), added with
  /// scale 1 and an empty history on first use.
  int slot(const std::string& name, Format format);
  int num_slots() const { return static_cast<int>(names_.size()); }
  const std::vector<std::string>& names() const { return names_; }
  Format format(int slot) const { return formats_.at(static_cast<size_t>(slot)); }

  /// [L, n] fp32: row 0 the current iteration's amax per slot, rows 1.. the earlier ones (delayed recipe).
  const torch::Tensor& amax_history() const { return amax_history_; }
  /// [n] fp32 each.
  const torch::Tensor& scale() const { return scale_; }
  const torch::Tensor& scale_inv() const { return scale_inv_; }

  /// The scale of a tensor of absolute maximum `amax` (fp32 [1] on the table's device) in `slot`, as the recipe
  /// computes it (format maximum / 2^margin / amax), or 1 when amax is 0 or not finite: the tensorwise recipe's.
  torch::Tensor scale_for(int slot, const torch::Tensor& amax) const;
  /// Records the amax [] / [1] (fp32, on the table's device) of a tensor cast in `slot`: row 0 keeps the maximum.
  void record_amax(int slot, const torch::Tensor& amax);
  /// The maximum of row 0 over `all_reduce_max` (a callback reducing an fp32 [n] tensor with MAX in place: the TP
  /// group's, or TP x DP's).
  template <typename ReduceMax>
  void reduce_amax(ReduceMax&& all_reduce_max) {
    torch::Tensor row = amax_history_[0].contiguous();  // [n]
    all_reduce_max(row);
    amax_history_[0].copy_(row);
  }
  /// One step of the delayed recipe over every slot (see the file comment). Also for tensorwise: the scales then
  /// come from row 0 (the last casts' amaxes) and are for inspection only.
  void update();

  /// Checkpoint state: {"amax_history": [L, n], "scale": [n], "scale_inv": [n]} and the slot names in order.
  std::unordered_map<std::string, torch::Tensor> state() const;
  /// Restores state() saved with slot names `names` (by name: the order may differ, and the saved state may hold more
  /// slots, e.g. every pipeline stage's; one of this table's slots missing is a CheckpointError naming it). A saved
  /// history of another length is cut to this one's (the most recent rows kept) or padded with zeros.
  void load_state(const std::vector<std::string>& names, const std::unordered_map<std::string, torch::Tensor>& state);
  /// The same state as JSON, for the checkpoint's meta/state.json: {"<slot>": {"scale": s, "amax_history": [row 0,
  /// row 1, ..]}, ..}. Tables of several stages merge by key (slot names are global).
  nlohmann::json to_json() const;
  /// load_state from to_json()'s form (CheckpointError naming what is malformed or missing).
  void load_json(const nlohmann::json& j);

  const Fp8Options& options() const { return options_; }

 private:
  void grow(int n);

  Fp8Options options_;
  torch::Device device_;
  std::vector<std::string> names_;
  std::vector<Format> formats_;
  std::unordered_map<std::string, int> index_;
  torch::Tensor amax_history_;  // [L, n] fp32
  torch::Tensor scale_;         // [n] fp32
  torch::Tensor scale_inv_;     // [n] fp32
  torch::Tensor scaled_max_;    // [n] fp32: format_max / 2^margin per slot
};

}  // namespace megaton::ops::fp8
