#include "checkpoint/hf.h"

#include <set>

#include "checkpoint/placement.h"
#include "core/error.h"

using nlohmann::json;

namespace megaton::checkpoint {

namespace {

int64_t geti(const json& c, const char* key, const std::string& where) {
  if (!c.contains(key) || !c[key].is_number_integer())
    throw UsageError(str(where, ": model config has no integer '", key, "'"));
  return c[key].get<int64_t>();
}

bool tanh_gelu(const json& c) {
  return c.value("openai_gelu", false) || !c.value("no_bias_gelu_fusion", false);
}

/// One canonical <-> HF pair: how to go from canonical to HF and back, and the canonical partition dim.
struct Rule {
  std::string canonical, hf;
  std::function<torch::Tensor(const torch::Tensor&)> fwd, back;
  std::vector<int64_t> canonical_shape;
  int partition_dim = -1;
};

torch::Tensor same(const torch::Tensor& t) {
  return t;
}
torch::Tensor transpose(const torch::Tensor& t) {
  return t.t().contiguous();
}

std::vector<Rule> rules(const json& c, HfArch arch, const std::string& where) {
  const int64_t L = geti(c, "num_layers", where), h = geti(c, "hidden_size", where),
                np = geti(c, "num_attention_heads", where);
  const int64_t hd = c.value("kv_channels", int64_t{0}) > 0 ? c["kv_channels"].get<int64_t>() : h / np;
  const int64_t f = c.value("ffn_hidden_size", int64_t{0}) > 0 ? c["ffn_hidden_size"].get<int64_t>() : 4 * h;
  const int64_t V = geti(c, "vocab_size", where);
  const int64_t qkv_out = 3 * np * hd;
  std::vector<Rule> r;
  const bool gpt2 = arch == HfArch::kGpt2;
  const std::string T = "transformer.";
  auto ln = [&](const std::string& can, const std::string& hf) {
    r.push_back({can + ".weight", hf + ".weight", same, same, {h}, -1});
    r.push_back({can + ".bias", hf + ".bias", same, same, {h}, -1});
  };
  if (gpt2) {
    r.push_back({"embedding.word_embeddings.weight", T + "wte.weight", same, same, {V, h}, 0});
    r.push_back({"embedding.position_embeddings.weight",
                 T + "wpe.weight",
                 same,
                 same,
                 {geti(c, "max_position_embeddings", where), h},
                 -1});
  } else {
    r.push_back({"embedding.word_embeddings.weight", T + "word_embeddings.weight", same, same, {V, h}, 0});
    ln("embedding.norm", T + "word_embeddings_layernorm");
  }
  for (int64_t i = 0; i < L; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".", q = T + "h." + std::to_string(i) + ".";
    ln(p + "input_layernorm", q + (gpt2 ? "ln_1" : "input_layernorm"));
    ln(p + "post_attention_layernorm", q + (gpt2 ? "ln_2" : "post_attention_layernorm"));
    if (gpt2) {
      // [np, 3, hd, h] -> [3, np, hd, h] -> [3h, h] -> Conv1D [h, 3h].
      r.push_back({p + "attention.qkv.weight",
                   q + "attn.c_attn.weight",
                   [=](const torch::Tensor& t) {
                     return t.permute({1, 0, 2, 3}).reshape({qkv_out, h}).t().contiguous();
                   },
                   [=](const torch::Tensor& t) {
                     return t.t().reshape({3, np, hd, h}).permute({1, 0, 2, 3}).contiguous();
                   },
                   {np, 3, hd, h},
                   0});
      r.push_back({p + "attention.qkv.bias",
                   q + "attn.c_attn.bias",
                   [=](const torch::Tensor& t) {
                     return t.permute({1, 0, 2}).reshape({qkv_out}).contiguous();
                   },
                   [=](const torch::Tensor& t) {
                     return t.reshape({3, np, hd}).permute({1, 0, 2}).contiguous();
                   },
                   {np, 3, hd},
                   0});
      r.push_back({p + "attention.dense.weight", q + "attn.c_proj.weight", transpose, transpose, {h, np * hd}, 1});
      r.push_back({p + "attention.dense.bias", q + "attn.c_proj.bias", same, same, {h}, -1});
      r.push_back({p + "mlp.fc1.weight", q + "mlp.c_fc.weight", transpose, transpose, {f, h}, 0});
      r.push_back({p + "mlp.fc1.bias", q + "mlp.c_fc.bias", same, same, {f}, 0});
      r.push_back({p + "mlp.fc2.weight", q + "mlp.c_proj.weight", transpose, transpose, {h, f}, 1});
      r.push_back({p + "mlp.fc2.bias", q + "mlp.c_proj.bias", same, same, {h}, -1});
    } else {
      r.push_back({p + "attention.qkv.weight",
                   q + "self_attention.query_key_value.weight",
                   [=](const torch::Tensor& t) {
                     return t.reshape({qkv_out, h}).contiguous();
                   },
                   [=](const torch::Tensor& t) {
                     return t.reshape({np, 3, hd, h}).contiguous();
                   },
                   {np, 3, hd, h},
                   0});
      r.push_back({p + "attention.qkv.bias",
                   q + "self_attention.query_key_value.bias",
                   [=](const torch::Tensor& t) { return t.reshape({qkv_out}).contiguous(); },
                   [=](const torch::Tensor& t) {
                     return t.reshape({np, 3, hd}).contiguous();
                   },
                   {np, 3, hd},
                   0});
      r.push_back({p + "attention.dense.weight", q + "self_attention.dense.weight", same, same, {h, np * hd}, 1});
      r.push_back({p + "attention.dense.bias", q + "self_attention.dense.bias", same, same, {h}, -1});
      r.push_back({p + "mlp.fc1.weight", q + "mlp.dense_h_to_4h.weight", same, same, {f, h}, 0});
      r.push_back({p + "mlp.fc1.bias", q + "mlp.dense_h_to_4h.bias", same, same, {f}, 0});
      r.push_back({p + "mlp.fc2.weight", q + "mlp.dense_4h_to_h.weight", same, same, {h, f}, 1});
      r.push_back({p + "mlp.fc2.bias", q + "mlp.dense_4h_to_h.bias", same, same, {h}, -1});
    }
  }
  ln("final_layernorm", T + "ln_f");
  return r;
}

}  // namespace

HfArch choose_hf_arch(const json& c, const std::string& requested) {
  const std::string pos = c.value("position_embedding_type", std::string("absolute"));
  HfArch a;
  if (requested == "gpt2")
    a = HfArch::kGpt2;
  else if (requested == "bloom")
    a = HfArch::kBloom;
  else if (requested == "auto")
    a = pos == "alibi" ? HfArch::kBloom : HfArch::kGpt2;
  else
    throw UsageError(str("--arch '", requested, "': expected gpt2, bloom or auto"));
  const char* name = a == HfArch::kGpt2 ? "GPT-2" : "BLOOM";
  auto need = [&](bool ok, const std::string& what) {
    MEGATON_CHECK(ok, UsageError, "export-hf: the checkpoint's model cannot be written as ", name, ": ", what);
  };
  need(c.value("glu_activation", std::string()).empty(), "it uses a GLU MLP (--glu-activation)");
  need(!c.value("untie_embeddings_and_output_weights", false), "its output layer is untied from the embedding");
  need(!c.value("mup", false),
       "it is a muP model (--mup): its input, output and attention multipliers have no "
       "place in the Hugging Face config");
  need(!c.value("apply_residual_connection_post_layernorm", false) || a == HfArch::kBloom,
       "--apply-residual-connection-post-layernorm");
  if (a == HfArch::kGpt2) {
    need(pos == "absolute", "position embeddings are '" + pos + "', GPT-2 needs absolute");
    need(!c.value("embed_layernorm", false), "it has an embedding LayerNorm (use bloom)");
  } else {
    need(pos == "alibi", "position embeddings are '" + pos + "', BLOOM needs alibi");
    need(c.value("embed_layernorm", false), "BLOOM needs the embedding LayerNorm (--embed-layernorm)");
    need(tanh_gelu(c), "BLOOM's GELU is the tanh approximation; the model uses exact GELU (--no-bias-gelu-fusion)");
    const int64_t h = c.value("hidden_size", int64_t{0}), f = c.value("ffn_hidden_size", int64_t{0});
    need(f == 0 || f == 4 * h, str("BLOOM's MLP is 4*hidden, the model has ffn_hidden_size ", f));
  }
  const int64_t h = c.value("hidden_size", int64_t{0}), np = c.value("num_attention_heads", int64_t{1}),
                kv = c.value("kv_channels", int64_t{0});
  need(kv == 0 || kv * np == h, str("kv_channels * heads (", kv, " * ", np, ") != hidden_size (", h, ")"));
  return a;
}

NamedTensors to_hf(const std::function<torch::Tensor(const std::string&)>& get, const json& c, HfArch arch) {
  NamedTensors out;
  for (const auto& r : rules(c, arch, "export-hf")) {
    const torch::Tensor t = get(r.canonical);
    MEGATON_CHECK(t.sizes().vec() == r.canonical_shape, CheckpointError, "export-hf: '", r.canonical, "' has shape ",
                  shape_str(t.sizes().vec()), ", the model config implies ", shape_str(r.canonical_shape));
    out.emplace_back(r.hf, r.fwd(t));
  }
  return out;
}

json hf_config(const json& c, HfArch arch, torch::ScalarType dtype) {
  const std::string dt = dtype == torch::kBFloat16 ? "bfloat16" : dtype == torch::kFloat16 ? "float16" : "float32";
  const int64_t h = c.at("hidden_size").get<int64_t>();
  const int64_t f = c.value("ffn_hidden_size", int64_t{0});
  const int64_t V = c.at("vocab_size").get<int64_t>();
  if (arch == HfArch::kGpt2) {
    json j = {{"architectures", {"GPT2LMHeadModel"}},
              {"model_type", "gpt2"},
              {"vocab_size", V},
              {"n_positions", c.at("max_position_embeddings")},
              {"n_ctx", c.at("max_position_embeddings")},
              {"n_embd", h},
              {"n_layer", c.at("num_layers")},
              {"n_head", c.at("num_attention_heads")},
              {"n_inner", f > 0 ? f : 4 * h},
              {"activation_function", tanh_gelu(c) ? "gelu_new" : "gelu"},
              {"layer_norm_epsilon", c.value("layernorm_epsilon", 1e-5)},
              {"resid_pdrop", 0.0},
              {"embd_pdrop", 0.0},
              {"attn_pdrop", 0.0},
              {"initializer_range", 0.02},
              {"scale_attn_weights", true},
              {"tie_word_embeddings", true},
              {"use_cache", true},
              {"torch_dtype", dt}};
    if (V == 50257) j["bos_token_id"] = j["eos_token_id"] = 50256;
    return j;
  }
  return {{"architectures", {"BloomForCausalLM"}},
          {"model_type", "bloom"},
          {"vocab_size", V},
          {"hidden_size", h},
          {"n_layer", c.at("num_layers")},
          {"n_head", c.at("num_attention_heads")},
          {"layer_norm_epsilon", c.value("layernorm_epsilon", 1e-5)},
          {"apply_residual_connection_post_layernorm", c.value("apply_residual_connection_post_layernorm", false)},
          {"hidden_dropout", 0.0},
          {"attention_dropout", 0.0},
          {"initializer_range", 0.02},
          {"pretraining_tp", 1},
          {"slow_but_exact", false},
          // Not read by transformers (ALiBi has no position table); carried so that import-hf restores the
          // training sequence length (BigScience's own configs carry it as "seq_length" too).
          {"seq_length", c.at("max_position_embeddings")},
          {"tie_word_embeddings", true},
          {"use_cache", true},
          {"bos_token_id", 1},
          {"eos_token_id", 2},
          {"pad_token_id", 3},
          {"torch_dtype", dt}};
}

namespace {

// config.json -> megaton's model_config and the architecture; every size checked.
json hf_model_config_checked(const json& hc, const std::string& where, HfArch& arch) {
  const std::string type = hc.value("model_type", std::string());
  auto gi = [&](std::initializer_list<const char*> keys) -> int64_t {
    for (const char* k : keys)
      if (hc.contains(k) && hc[k].is_number_integer()) return hc[k].get<int64_t>();
    throw DataError(str(where, "/config.json: no integer '", *keys.begin(), "'"));
  };
  json c;
  if (type == "gpt2") {
    arch = HfArch::kGpt2;
    const int64_t h = gi({"n_embd", "hidden_size"});
    const std::string act = hc.value("activation_function", std::string("gelu_new"));
    MEGATON_CHECK(act == "gelu" || act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast", DataError,
                  where, "/config.json: activation_function '", act, "' is not a GELU megaton has");
    c = {{"num_layers", gi({"n_layer", "num_hidden_layers"})},
         {"hidden_size", h},
         {"num_attention_heads", gi({"n_head", "num_attention_heads"})},
         {"ffn_hidden_size",
          hc.contains("n_inner") && hc["n_inner"].is_number_integer() ? hc["n_inner"].get<int64_t>() : 4 * h},
         {"max_position_embeddings", gi({"n_positions", "max_position_embeddings"})},
         {"position_embedding_type", "absolute"},
         {"embed_layernorm", false},
         {"glu_activation", ""},
         {"openai_gelu", act != "gelu"},
         {"no_bias_gelu_fusion", act == "gelu"},
         {"layernorm_epsilon", hc.value("layer_norm_epsilon", 1e-5)},
         {"apply_residual_connection_post_layernorm", false},
         {"untie_embeddings_and_output_weights", false},
         {"vocab_size", gi({"vocab_size"})}};
  } else if (type == "bloom") {
    arch = HfArch::kBloom;
    const int64_t h = gi({"hidden_size", "n_embed"});
    c = {{"num_layers", gi({"n_layer", "num_hidden_layers"})},
         {"hidden_size", h},
         {"num_attention_heads", gi({"n_head", "num_attention_heads"})},
         {"ffn_hidden_size", 4 * h},
         // BLOOM's config has no position limit (ALiBi); megaton's export writes "seq_length", the hub's BLOOM
         // models were trained at 2048.
         {"max_position_embeddings", hc.value("seq_length", int64_t{2048})},
         {"position_embedding_type", "alibi"},
         {"embed_layernorm", true},
         {"glu_activation", ""},
         {"openai_gelu", true},
         {"no_bias_gelu_fusion", false},
         {"layernorm_epsilon", hc.value("layer_norm_epsilon", 1e-5)},
         {"apply_residual_connection_post_layernorm", hc.value("apply_residual_connection_post_layernorm", false)},
         {"untie_embeddings_and_output_weights", false},
         {"vocab_size", gi({"vocab_size"})}};
  } else {
    throw DataError(str(where, "/config.json: model_type '", type, "' is not supported (gpt2, bloom)"));
  }
  // Sizes from a file: each must be positive, and the heads must divide the hidden size.
  for (const char* key : {"num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size",
                          "max_position_embeddings", "vocab_size"}) {
    const int64_t v = c[key].get<int64_t>();
    MEGATON_CHECK(v > 0 && v < (int64_t{1} << 32), DataError, where, "/config.json: ", key, " is ", v,
                  "; expected a positive size");
  }
  MEGATON_CHECK(c["hidden_size"].get<int64_t>() % c["num_attention_heads"].get<int64_t>() == 0, DataError, where,
                "/config.json: hidden size ", c["hidden_size"], " is not divisible by the ", c["num_attention_heads"],
                " attention heads");
  c["kv_channels"] = c["hidden_size"].get<int64_t>() / c["num_attention_heads"].get<int64_t>();
  return c;
}

}  // namespace

json hf_model_config(const json& hc, const std::string& where, HfArch* arch) {
  MEGATON_CHECK(hc.is_object(), DataError, where, "/config.json: expected a JSON object, found ", hc.type_name());
  HfArch a = HfArch::kGpt2;
  try {
    json c = hf_model_config_checked(hc, where, a);
    if (arch) *arch = a;
    return c;
  } catch (const json::exception& e) {  // a key of the wrong type anywhere: a data error naming it
    throw DataError(str(where, "/config.json: malformed (", e.what(), ")"));
  }
}

Imported from_hf(const json& hc, const std::map<std::string, torch::Tensor>& weights, const std::string& where) {
  HfArch arch = HfArch::kGpt2;
  Imported im;
  im.model_config = hf_model_config(hc, where, &arch);
  const json& c = im.model_config;
  // No more layers than the weights could hold (a hostile n_layer would otherwise allocate its rules before any
  // weight is looked at).
  MEGATON_CHECK(c["num_layers"].get<int64_t>() <= static_cast<int64_t>(weights.size()), DataError, where,
                "/config.json: ", c["num_layers"], " layers, but the weights hold only ", weights.size(), " tensors");
  std::set<std::string> used;
  for (const auto& r : rules(c, arch, where)) {
    // Accept keys with or without the "transformer." prefix (GPT2Model / BloomModel save without it).
    auto it = weights.find(r.hf);
    if (it == weights.end()) it = weights.find(r.hf.substr(std::string("transformer.").size()));
    MEGATON_CHECK(it != weights.end(), DataError, where, ": weight '", r.hf, "' is missing");
    used.insert(it->first);
    torch::Tensor t = r.back(it->second);
    MEGATON_CHECK(t.sizes().vec() == r.canonical_shape, DataError, where, ": weight '", it->first, "' has shape ",
                  shape_str(it->second.sizes().vec()), ", which does not give ", shape_str(r.canonical_shape), " for '",
                  r.canonical, "'");
    im.tensors.emplace_back(r.canonical, t, r.partition_dim);
  }
  for (const auto& [k, t] : weights) {
    if (used.count(k)) continue;
    if (k == "lm_head.weight") {
      const auto& wte = std::get<1>(im.tensors.front());
      MEGATON_CHECK(t.sizes() == wte.sizes() && torch::equal(t, wte), DataError, where,
                    ": lm_head.weight differs from the word embedding (untied output layers are not imported)");
    }
    im.unused.push_back(k);
  }
  return im;
}

}  // namespace megaton::checkpoint
