// Everything needed to build a GPT shard: the architecture (GptOptions, validated), the kernels it runs, the
// vocabulary (real and padded: GptOptions::padded_vocab_size), the seed, the training dtype and device, and how
// layers are spread over pipeline stages. The parallel layout itself comes from dist::ProcessGroups.
#pragma once
#include <torch/torch.h>

#include <nlohmann/json.hpp>
#include <string>

#include "model/gpt_options.h"
#include "model/positions.h"
#include "ops/activations.h"
#include "ops/fp8/fp8_scaling.h"
#include "ops/kernel_options.h"
#include "parallel/parallel_options.h"

namespace megaton::model {

struct GptConfig {
  GptOptions model;  // validated (kv_channels, ffn_hidden_size filled in)
  ops::KernelOptions kernels;
  ops::fp8::Fp8Options fp8;       // --fp8-format and its recipe: the transformer layers' linear GEMMs in FP8
  int64_t vocab_size = 0;         // the tokenizer's
  int64_t padded_vocab_size = 0;  // rows of the word embedding; >= vocab_size, divisible by TP
  uint64_t seed = 1234;           // --seed: parameter init and dropout
  torch::ScalarType dtype = torch::kFloat32;  // --fp16 / --bf16 params
  torch::Device device = torch::kCPU;
  std::string pp_partition_method = "uniform";  // uniform | parameters | type:REGEX (partition_layers)
  bool use_fused_attention = true;              // at::scaled_dot_product_attention where LibTorch has it

  PositionType position_type() const { return parse_position_type(model.position_embedding_type); }
  ops::Activation activation() const {
    return ops::activation_from_flags(model.glu_activation, model.openai_gelu, model.bias_gelu_fusion);
  }
  /// The residual stream's dtype: the hidden states between layers and between pipeline stages (fp32 with
  /// --fp32-residual-connection, else the params dtype).
  torch::ScalarType residual_dtype() const { return model.fp32_residual_connection ? torch::kFloat32 : dtype; }
  int64_t hidden() const { return model.hidden_size; }
  int64_t heads() const { return model.num_attention_heads; }
  int64_t head_dim() const { return model.kv_channels; }
  int64_t ffn() const { return model.ffn_hidden_size; }
};

/// The model's constraints on a layout, checked with the flags before anything is built: heads and ffn divisible by
/// TP, at least one layer per stage, and with the interleaved schedule layers divisible by PP x layers per virtual
/// stage. UsageError names the flags.
void check_layout(const GptOptions& model, const parallel::ParallelOptions& parallel);

/// The architecture keys of a checkpoint (meta/model_config.json): equal at load or the load fails naming the key.
/// Independent of TP/PP/DP (the padded vocabulary is not in it: it depends on TP).
nlohmann::json architecture_json(const GptConfig& c);

/// Throws UsageError unless the config fits a TP x PP layout (heads, ffn, padded vocab divisible by TP; layers >= PP;
/// rotary head dim even; vocab <= padded vocab).
void validate_gpt_config(const GptConfig& c, int tp, int pp);

/// Layers of each pipeline stage. "uniform": num_layers/pp each, the remainder to the earliest stages.
/// "parameters": contiguous split minimising the largest stage's parameter count, counting the word (and position)
/// embedding on the first stage and the output embedding + final LayerNorm on the last; every stage gets >= 1 layer.
/// "type:REGEX": DeepSpeed's partition by layer type over Megatron-DeepSpeed's layer list
/// (model/deepspeed_partition.h); UsageError where it leaves a stage without a layer.
std::vector<int> partition_layers(const GptConfig& c, int pp);

}  // namespace megaton::model
