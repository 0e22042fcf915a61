#include "model/gpt_config.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "model/deepspeed_partition.h"

namespace megaton::model {

namespace {

// The sizes TP splits and the layers PP spreads, against TP x PP.
// A DeepSpeed type partition (--pp-partition-method type:REGEX) may leave a stage without transformer layers (BLOOMZ's
// 70 layers over 72 stages put the embedding alone on the first stage, the LM head alone on the last).
bool type_partition(const std::string& method) {
  return method.rfind("type:", 0) == 0;
}

void check_tp_pp(const GptOptions& m, int tp, int pp, const std::string& partition_method) {
  MEGATON_CHECK(m.num_attention_heads % tp == 0, UsageError, "--num-attention-heads (", m.num_attention_heads,
                ") must be divisible by --tensor-model-parallel-size (", tp, ")");
  MEGATON_CHECK(m.ffn_hidden_size % tp == 0, UsageError, "--ffn-hidden-size (", m.ffn_hidden_size,
                ") must be divisible by --tensor-model-parallel-size (", tp, ")");
  MEGATON_CHECK(m.num_layers >= pp || type_partition(partition_method), UsageError, "--num-layers (", m.num_layers,
                ") must be >= --pipeline-model-parallel-size (", pp, ")");
}

}  // namespace

void validate_gpt_config(const GptConfig& c, int tp, int pp) {
  const auto& m = c.model;
  MEGATON_CHECK(
      m.num_layers > 0 && m.hidden_size > 0 && m.num_attention_heads > 0 && m.kv_channels > 0 && m.ffn_hidden_size > 0,
      UsageError, "model config not validated: --num-layers ", m.num_layers, ", --hidden-size ", m.hidden_size,
      ", --num-attention-heads ", m.num_attention_heads, ", --kv-channels ", m.kv_channels, ", --ffn-hidden-size ",
      m.ffn_hidden_size, " must all be > 0 (call GptOptions::validate first)");
  MEGATON_CHECK(c.vocab_size > 0 && c.padded_vocab_size >= c.vocab_size, UsageError, "padded vocabulary (",
                c.padded_vocab_size, ") must be >= the vocabulary (", c.vocab_size, ") and > 0");
  check_tp_pp(m, tp, pp, c.pp_partition_method);
  MEGATON_CHECK(c.padded_vocab_size % tp == 0, UsageError, "padded vocabulary (", c.padded_vocab_size,
                ") must be divisible by --tensor-model-parallel-size (", tp, ")");
  if (c.position_type() == PositionType::kRotary)
    MEGATON_CHECK(m.kv_channels % 2 == 0, UsageError, "--position-embedding-type rotary needs an even head dimension (",
                  "--kv-channels ", m.kv_channels, ")");
  if (c.position_type() == PositionType::kAbsolute)
    MEGATON_CHECK(m.max_position_embeddings > 0, UsageError,
                  "--position-embedding-type absolute needs --max-position-embeddings > 0");
  MEGATON_CHECK(c.dtype == torch::kFloat32 || c.dtype == torch::kBFloat16 || c.dtype == torch::kFloat16 ||
                    c.dtype == torch::kFloat64,
                UsageError, "model dtype must be fp32, bf16, fp16 (or fp64 for tests), got ", c.dtype);
  (void)c.activation();  // throws on an unknown --glu-activation
}

void check_layout(const GptOptions& m, const parallel::ParallelOptions& p) {
  const int tp = p.tensor_model_parallel_size, pp = p.pipeline_model_parallel_size;
  check_tp_pp(m, tp, pp, p.pp_partition_method);
  if (p.interleaved())
    MEGATON_CHECK(m.num_layers % (pp * p.num_layers_per_virtual_pipeline_stage) == 0, UsageError, "--num-layers (",
                  m.num_layers,
                  ") must be divisible by --pipeline-model-parallel-size x "
                  "--num-layers-per-virtual-pipeline-stage (",
                  pp, " x ", p.num_layers_per_virtual_pipeline_stage, ")");
}

nlohmann::json architecture_json(const GptConfig& c) {
  const auto& m = c.model;
  return {{"num_layers", m.num_layers},
          {"hidden_size", m.hidden_size},
          {"ffn_hidden_size", m.ffn_hidden_size},
          {"num_attention_heads", m.num_attention_heads},
          {"kv_channels", m.kv_channels},
          {"max_position_embeddings", m.max_position_embeddings},
          {"vocab_size", c.vocab_size},
          {"position_embedding_type", m.position_embedding_type},
          {"embed_layernorm", m.embed_layernorm},
          {"glu_activation", m.glu_activation},
          {"openai_gelu", m.openai_gelu},
          // Megatron's unfused bias-GELU is the exact (erf) GELU: true only where that is the activation, so a GLU
          // or --openai-gelu run loads whichever way the flag is given. The HF export reads it (gelu vs gelu_new).
          {"no_bias_gelu_fusion", c.activation() == ops::Activation::kGeluErf},
          {"apply_residual_connection_post_layernorm", m.apply_residual_connection_post_layernorm},
          {"layernorm_epsilon", m.layernorm_epsilon},
          {"untie_embeddings_and_output_weights", m.untie_embeddings_and_output_weights},
          {"mup", m.mup},
          {"mup_input_mult", m.mup ? m.mup_input_mult : 1.0},
          {"mup_output_mult", m.mup ? m.mup_output_mult : 1.0},
          {"mup_attn_mult", m.mup ? m.mup_attn_mult : 1.0}};
}

std::vector<int> partition_layers(const GptConfig& c, int pp) {
  const int L = c.model.num_layers;
  const std::string& method = c.pp_partition_method;
  if (type_partition(method) && pp > 1) {
    // As DeepSpeed places them: a stage may hold no transformer layer (only the embedding, the final LayerNorm and
    // LM head, or nothing: it passes its input on).
    const bool half = c.dtype == torch::kFloat16 || c.dtype == torch::kBFloat16;
    return deepspeed_type_partition(method, L, pp, half);
  }
  MEGATON_CHECK(L >= pp, UsageError, "--num-layers (", L, ") must be >= --pipeline-model-parallel-size (", pp, ")");
  std::vector<int> out(pp, L / pp);
  for (int i = 0; i < L % pp; ++i) out[i] += 1;
  if (method == "uniform" || pp == 1) return out;
  MEGATON_CHECK(method == "parameters", UsageError, "--pp-partition-method: expected uniform|parameters|type:*, got '",
                method, "'");
  const auto& m = c.model;
  const int64_t h = m.hidden_size, f = m.ffn_hidden_size, kv = int64_t(m.kv_channels) * m.num_attention_heads;
  const int64_t glu = m.glu_activation.empty() ? 1 : 2;
  const int64_t layer = 4 * h + h * 3 * kv + 3 * kv + kv * h + h + h * glu * f + glu * f + f * h + h;
  const int64_t emb = c.padded_vocab_size * h +
                      (c.position_type() == PositionType::kAbsolute ? int64_t(m.max_position_embeddings) * h : 0) +
                      (m.embed_layernorm ? 2 * h : 0);
  const int64_t head = c.padded_vocab_size * h + 2 * h;
  auto stage_cost = [&](int stage, int layers) {
    return layers * layer + (stage == 0 ? emb : 0) + (stage == pp - 1 ? head : 0);
  };
  // best[s][n]: the best split of the first n layers over stages [0, s]: smallest maximum stage cost, ties broken by
  // the smallest sum of squared costs (the most even split); choice[s][n]: layers of stage s in it.
  struct Score {
    int64_t max = std::numeric_limits<int64_t>::max();
    double squares = 0;
    bool operator<(const Score& o) const { return max != o.max ? max < o.max : squares < o.squares; }
  };
  const int64_t inf = std::numeric_limits<int64_t>::max();
  std::vector<std::vector<Score>> best(pp, std::vector<Score>(L + 1));
  std::vector<std::vector<int>> choice(pp, std::vector<int>(L + 1, 0));
  for (int n = 1; n <= L; ++n) {
    const double cost = double(stage_cost(0, n));
    best[0][n] = {stage_cost(0, n), cost * cost};
    choice[0][n] = n;
  }
  for (int s = 1; s < pp; ++s)
    for (int n = s + 1; n <= L; ++n)
      for (int k = 1; k <= n - s; ++k) {  // stage s takes k layers
        const Score& prev = best[s - 1][n - k];
        if (prev.max == inf) continue;
        const int64_t cost = stage_cost(s, k);
        const Score v{std::max(prev.max, cost), prev.squares + double(cost) * double(cost)};
        if (v < best[s][n]) best[s][n] = v, choice[s][n] = k;
      }
  int n = L;
  for (int s = pp - 1; s >= 0; --s) {
    out[s] = choice[s][n];
    n -= out[s];
  }
  return out;
}

}  // namespace megaton::model
