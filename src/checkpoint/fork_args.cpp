#include "checkpoint/fork_args.h"

#include "core/error.h"

using nlohmann::json;

namespace megaton::checkpoint {

namespace {
/// megatron/enums.py's PositionEmbeddingType: value i is kPositionTypes[i].
const char* const kPositionTypes[] = {"", "rotary", "absolute", "alibi"};

/// megatron/enums.py: name of each value.
const char* enum_name(const std::string& cls, int64_t v) {
  if (cls == "megatron.enums.PositionEmbeddingType") return v >= 1 && v <= 3 ? kPositionTypes[v] : nullptr;
  if (cls == "megatron.enums.AttnMaskType") {
    static const char* n[] = {"", "padding", "causal", "prefix", "custom"};
    return v >= 1 && v <= 4 ? n[v] : nullptr;
  }
  return nullptr;
}
}  // namespace

int64_t position_embedding_enum(const std::string& name) {
  for (int64_t v = 1; v <= 3; ++v)
    if (name == kPositionTypes[v]) return v;
  throw UsageError(str("position_embedding_type '", name, "': Megatron-DeepSpeed has rotary, absolute and alibi"));
}

json fork_args_json(const Py& args, const std::string& where) {
  MEGATON_CHECK(args && args->is(PyNode::Kind::kRecord) && args->state && args->state->is(PyNode::Kind::kDict),
                CheckpointError, where, ": 'args' is not an argparse.Namespace");
  json out = json::object();
  for (const auto& [k, v] : args->state->dict) {
    if (!k->is(PyNode::Kind::kStr)) continue;
    if (v->is(PyNode::Kind::kRecord) && v->items.size() == 1 && v->items[0]->is(PyNode::Kind::kStr) &&
        v->s.rfind("megatron.enums.", 0) == 0) {  // an enum pickled by name
      out[k->s] = v->items[0]->s;
      continue;
    }
    if (v->is(PyNode::Kind::kRecord) && v->items.size() == 1 && v->items[0]->is(PyNode::Kind::kInt)) {
      if (const char* n = enum_name(v->s, v->items[0]->i)) {
        out[k->s] = n;
        continue;
      }
    }
    out[k->s] = py_to_json(v);
  }
  return out;
}

json fork_model_config(const json& a, int64_t vocab_size, const std::string& where) {
  auto gi = [&](const char* k) -> int64_t {
    MEGATON_CHECK(a.contains(k) && a[k].is_number_integer(), CheckpointError, where, ": args has no integer '", k, "'");
    return a[k].get<int64_t>();
  };
  auto flag = [&](const char* k, bool dflt) { return a.contains(k) && a[k].is_boolean() ? a[k].get<bool>() : dflt; };
  const int64_t h = gi("hidden_size"), np = gi("num_attention_heads");
  const int64_t ffn = a.contains("ffn_hidden_size") && a["ffn_hidden_size"].is_number_integer()
                          ? a["ffn_hidden_size"].get<int64_t>()
                          : 4 * h;
  const int64_t kv =
      a.contains("kv_channels") && a["kv_channels"].is_number_integer() ? a["kv_channels"].get<int64_t>() : h / np;
  const std::string pos = a.contains("position_embedding_type") && a["position_embedding_type"].is_string()
                              ? a["position_embedding_type"].get<std::string>()
                              : "absolute";
  const std::string glu =
      a.contains("glu_activation") && a["glu_activation"].is_string() ? a["glu_activation"].get<std::string>() : "";
  const bool openai = flag("openai_gelu", false);
  const bool fusion = flag("bias_gelu_fusion", true);
  const int64_t max_pos = a.contains("max_position_embeddings") && a["max_position_embeddings"].is_number_integer()
                              ? a["max_position_embeddings"].get<int64_t>()
                              : gi("seq_length");
  return {{"num_layers", gi("num_layers")},
          {"hidden_size", h},
          {"ffn_hidden_size", ffn},
          {"num_attention_heads", np},
          {"kv_channels", kv},
          {"max_position_embeddings", max_pos},
          {"vocab_size", vocab_size},
          {"position_embedding_type", pos},
          {"embed_layernorm", flag("embed_layernorm", false)},
          {"glu_activation", glu},
          {"openai_gelu", openai},
          {"no_bias_gelu_fusion", glu.empty() && !openai && !fusion},
          {"apply_residual_connection_post_layernorm", flag("apply_residual_connection_post_layernorm", false)},
          {"layernorm_epsilon", a.contains("layernorm_epsilon") && a["layernorm_epsilon"].is_number()
                                    ? a["layernorm_epsilon"].get<double>()
                                    : 1e-5},
          {"untie_embeddings_and_output_weights", false},
          {"mup", false},
          {"mup_input_mult", 1.0},
          {"mup_output_mult", 1.0},
          {"mup_attn_mult", 1.0}};
}

torch::ScalarType fork_params_dtype(const json& a) {
  if (a.value("bf16", false)) return torch::kBFloat16;
  if (a.value("fp16", false)) return torch::kFloat16;
  return torch::kFloat32;
}

}  // namespace megaton::checkpoint
