// What the rest of the system needs to know about one parameter shard: its canonical (global) name and shape, how it
// is split over tensor parallelism, and how the optimizer treats it. The model produces a list of these; the
// optimizer (weight decay, grad-norm clipping counting replicated params once), the data-parallel gradient buckets,
// and the checkpoint writer (each rank writes its hyperslab of the global tensor) all consume the same list.
#pragma once
#include <torch/torch.h>

#include <string>
#include <vector>

namespace megaton::parallel {

struct ParamInfo {
  /// Canonical name, independent of TP/PP: "embedding.word_embeddings.weight", "layers.3.attention.qkv.weight",
  /// "layers.3.mlp.fc1.bias", "final_layernorm.weight". Layer numbers are global (not per stage).
  std::string name;
  /// The local shard (a leaf tensor with requires_grad), in the training dtype.
  torch::Tensor param;
  /// Shape of the full, unsharded tensor in the canonical layout (checkpoint shape).
  std::vector<int64_t> global_shape;
  /// Dimension of global_shape split evenly over TP ranks; -1 when every TP rank holds the whole tensor.
  int partition_dim = -1;
  /// Rows of the global tensor that are padding and not stored (vocab padding of the word embedding); 0 otherwise.
  int64_t global_unpadded_rows = 0;
  /// Biases and LayerNorm parameters get no weight decay (Megatron's _get_params_for_weight_decay_optimization).
  bool no_weight_decay = false;
  /// The word embedding when it is tied between the first and last pipeline stage: its gradient is summed over the
  /// embedding group, and only the first stage counts it in the gradient norm.
  bool tied_embedding = false;
  /// bitsandbytes' 8-bit Adam (--use-bnb-optimizer) keeps this parameter's moments in fp32, as the fork overrides
  /// them to 32 bits for the word embedding (both pipeline ends' copies).
  bool fp32_optimizer_state = false;
  /// Multiplies the learning rate of this parameter's Adam update, not of its weight decay: muP's 1/width for the
  /// weights whose two dimensions grow with the width (--mup), as mup.MuAdam scales its parameter groups.
  double lr_scale = 1.0;

  bool tp_replicated() const { return partition_dim < 0; }
};

using ParamList = std::vector<ParamInfo>;

}  // namespace megaton::parallel
