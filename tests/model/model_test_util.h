// Tiny GPT configurations and comparison helpers shared by the model's unit tests and its multi-rank tests.
#pragma once
#include <torch/torch.h>

#include <map>
#include <string>

#include "model/gpt_config.h"
#include "parallel/param_info.h"

namespace megaton::modeltest {

/// 2 layers, hidden 32, 8 heads (head dim 4), ffn 64, seq 8, vocab 100 padded to 128; dropout off.
inline model::GptConfig tiny_config(const std::string& positions = "absolute", const std::string& glu = "") {
  model::GptOptions m;
  m.num_layers = 2;
  m.hidden_size = 32;
  m.num_attention_heads = 8;
  m.ffn_hidden_size = 64;
  m.seq_length = 8;
  m.max_position_embeddings = 16;
  m.position_embedding_type = positions;
  m.glu_activation = glu;
  if (!glu.empty()) m.bias_gelu_fusion = false;
  m.hidden_dropout = 0.0;
  m.attention_dropout = 0.0;
  m.init_method_std = 0.2;  // large enough that every layer matters in the comparisons
  m.validate();
  model::GptConfig c;
  c.model = m;
  c.vocab_size = 100;
  c.padded_vocab_size = 128;
  c.seed = 1234;
  return c;
}

/// Deterministic token ids [b, s] in [0, vocab).
inline torch::Tensor tokens(int64_t b, int64_t s, int64_t vocab, int64_t salt = 0) {
  return (torch::arange(b * s, torch::kInt64).view({b, s}) * 37 + 11 + salt * 13).remainder(vocab);
}

/// Name -> parameter of a ParamList.
inline std::map<std::string, parallel::ParamInfo> by_name(const parallel::ParamList& ps) {
  std::map<std::string, parallel::ParamInfo> out;
  for (const auto& p : ps) out[p.name] = p;
  return out;
}

/// Max |a - b| / (1 + max |b|): a scale-aware error for comparisons of fp32 results.
inline double rel_err(const torch::Tensor& a, const torch::Tensor& b) {
  auto a64 = a.detach().to(torch::kFloat64), b64 = b.detach().to(torch::kFloat64);
  return (a64 - b64).abs().max().item<double>() / (1.0 + b64.abs().max().item<double>());
}

}  // namespace megaton::modeltest
