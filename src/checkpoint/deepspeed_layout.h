// Where each of megaton's canonical parameters lives in the checkpoints Megatron-DeepSpeed writes with --deepspeed
// (a DeepSpeed PipelineModule, GPTModelPipe): its name there, the pipeline layer file that holds it, and how its
// tensor-parallel slices make the whole.
//
//   GPTModelPipe's layers: 0 fp16 cast, 1 embedding (tied), 2 transpose, 3 .. 3+L-1 transformer layers,
//   3+L transpose back, 4+L final LayerNorm, 5+L tied embedding as the head.
//   megaton                                      DeepSpeed parameter name               slices (per TP rank)
//   embedding.word_embeddings.weight [V, h]      tied_modules.embed.word_embeddings.weight   [V/tp, h], rows
//   embedding.position_embeddings.weight         tied_modules.embed.position_embeddings.weight  replicated
//   embedding.norm.{weight,bias}                 tied_modules.embed.word_embeddings.norm.*   replicated
//   layers.i.input_layernorm.*                   {3+i}.input_layernorm.*                     replicated
//   layers.i.attention.qkv.weight [np, 3, d, h]  {3+i}.self_attention.query_key_value.weight [np/tp*3*d, h]
//   layers.i.attention.dense.weight [h, np*d]    {3+i}.self_attention.dense.weight           [h, np*d/tp]
//   layers.i.mlp.fc1.weight [f, h] | [2, f, h]   {3+i}.mlp.dense_h_to_4h.weight              [f/tp, h] | [2*f/tp, h]
//   layers.i.mlp.fc2.weight [h, f]               {3+i}.mlp.dense_4h_to_h.weight              [h, f/tp]
//   final_layernorm.*                            {4+L}.*                                     replicated
// A slice is the canonical tensor's shard along its partition dimension, reshaped: the checkpoint_version 3 row
// order of the fused QKV ([np, 3, d] per rank) and the GLU halves ([2, f/tp] per rank) are megaton's own.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace megaton::checkpoint {

struct DsParam {
  std::string canonical;                 // megaton's name
  std::string ds_name;                   // DeepSpeed's (named_parameters of the PipelineModule)
  int layer = 0;                         // pipeline layer index (layer_XX file)
  std::string local_name;                // the key in that layer's file
  std::vector<int64_t> canonical_shape;  // global, word embedding at the padded vocabulary
  std::vector<int64_t> ds_full_shape;    // the TP slices concatenated (universal checkpoint 'param'), padded
  int partition_dim = -1;                // of canonical_shape; -1 replicated across TP
  int ds_cat_dim = -1;                   // of the DeepSpeed slices; -1 replicated
  bool weight_decay = true;              // the fork's optimizer group: weights decay, biases and LayerNorms do not
  int n_sub_params = 1;                  // 2 for a GLU's fc1: two halves, each split across TP on its own
};

/// The parameters of a GPT model_config (megaton's architecture JSON), word embedding at `padded_vocab` rows.
/// UsageError for what GPTModelPipe does not have (untied output layer, muP).
std::vector<DsParam> deepspeed_params(const nlohmann::json& model_config, int64_t padded_vocab);

/// The pipeline layer index of the final LayerNorm for `num_layers` transformer layers.
inline int ds_final_norm_layer(int64_t num_layers) {
  return static_cast<int>(num_layers) + 4;
}

}  // namespace megaton::checkpoint
