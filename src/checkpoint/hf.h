// Mapping between megaton's canonical parameters and Hugging Face transformers checkpoints, for export-hf/import-hf.
//
// GPT-2 (GPT2LMHeadModel, Conv1D weights stored [in, out]):
//   embedding.word_embeddings.weight [V, h]       -> transformer.wte.weight [V, h]  (lm_head tied, not stored)
//   embedding.position_embeddings.weight          -> transformer.wpe.weight
//   layers.i.input_layernorm.{weight,bias}        -> transformer.h.i.ln_1.*
//   layers.i.attention.qkv.weight [np, 3, hd, h]  -> transformer.h.i.attn.c_attn.weight [h, 3h]: columns q | k | v,
//                                                    each head-major:  c_attn[:, w*h + n*hd + d] = qkv[n, w, d, :]
//   layers.i.attention.qkv.bias [np, 3, hd]       -> ...attn.c_attn.bias [3h] (same order)
//   layers.i.attention.dense.weight [h, h]        -> ...attn.c_proj.weight [h, h] (transposed)
//   layers.i.post_attention_layernorm.*           -> ...ln_2.*
//   layers.i.mlp.fc1.weight [f, h]                -> ...mlp.c_fc.weight [h, f] (transposed)
//   layers.i.mlp.fc2.weight [h, f]                -> ...mlp.c_proj.weight [f, h] (transposed)
//   final_layernorm.*                             -> transformer.ln_f.*
// BLOOM (BloomForCausalLM, ALiBi, embedding LayerNorm, nn.Linear weights [out, in]):
//   embedding.word_embeddings.weight              -> transformer.word_embeddings.weight
//   embedding.norm.*                              -> transformer.word_embeddings_layernorm.*
//   layers.i.attention.qkv.weight [np, 3, hd, h]  -> transformer.h.i.self_attention.query_key_value.weight [3h, h]
//                                                    (BLOOM's own [np, 3, hd] row order: a plain reshape)
//   layers.i.attention.dense.*                    -> ...self_attention.dense.*
//   layers.i.mlp.fc1.* / fc2.*                    -> ...mlp.dense_h_to_4h.* / dense_4h_to_h.*
//   layers.i.{input,post_attention}_layernorm.*   -> same names;  final_layernorm.* -> transformer.ln_f.*
#pragma once
#include <torch/torch.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/safetensors.h"

namespace megaton::checkpoint {

enum class HfArch { kGpt2, kBloom };

/// "gpt2" | "bloom" | "auto" (bloom for ALiBi models, else gpt2). UsageError when the model does not fit the
/// architecture (e.g. GLU, rotary, untied embeddings, embedding LayerNorm for GPT-2), naming the property.
HfArch choose_hf_arch(const nlohmann::json& model_config, const std::string& requested);

/// HF tensors from canonical ones; `get(name)` returns a canonical model tensor (word embedding unpadded).
NamedTensors to_hf(const std::function<torch::Tensor(const std::string&)>& get, const nlohmann::json& model_config,
                   HfArch arch);

/// HF config.json for the architecture.
nlohmann::json hf_config(const nlohmann::json& model_config, HfArch arch, torch::ScalarType dtype);

/// From a HF config.json alone: megaton's model_config (kv_channels included) and, when `arch` is given, the
/// architecture. DataError naming `where`/config.json and the key for an unsupported model_type, a missing, mistyped
/// or non-positive size, or heads that do not divide the hidden size. Checked before any weight is read.
nlohmann::json hf_model_config(const nlohmann::json& hf_config, const std::string& where, HfArch* arch = nullptr);

/// From a HF config.json and its weights: megaton's model_config and the canonical tensors (with their
/// partition_dim). DataError naming the key for a missing or mis-shaped weight or an unsupported model_type.
struct Imported {
  nlohmann::json model_config;
  std::vector<std::tuple<std::string, torch::Tensor, int>> tensors;  // canonical name, tensor, partition_dim
  std::vector<std::string> unused;                                   // HF keys not mapped (buffers, tied lm_head)
};
Imported from_hf(const nlohmann::json& hf_config, const std::map<std::string, torch::Tensor>& weights,
                 const std::string& where);

}  // namespace megaton::checkpoint
