#include "checkpoint/deepspeed_layout.h"

#include "core/error.h"

using nlohmann::json;

namespace megaton::checkpoint {

std::vector<DsParam> deepspeed_params(const json& c, int64_t padded_vocab) {
  auto gi = [&](const char* k) -> int64_t {
    MEGATON_CHECK(c.contains(k) && c[k].is_number_integer(), CheckpointError, "model configuration: no integer '", k,
                  "'");
    return c[k].get<int64_t>();
  };
  const int64_t L = gi("num_layers"), h = gi("hidden_size"), np = gi("num_attention_heads"), f = gi("ffn_hidden_size");
  const int64_t d = c.contains("kv_channels") ? gi("kv_channels") : h / np;
  MEGATON_CHECK(
      !c.value("untie_embeddings_and_output_weights", false), UsageError,
      "Megatron-DeepSpeed's GPTModelPipe ties the output layer to the word embedding; this model unties them");
  MEGATON_CHECK(!c.value("mup", false), UsageError,
                "Megatron-DeepSpeed's GPTModelPipe has no muP; this model was trained with --mup");
  const bool glu = !c.value("glu_activation", std::string()).empty();
  const bool absolute = c.value("position_embedding_type", std::string("absolute")) == "absolute";
  std::vector<DsParam> out;
  auto add = [&](std::string canonical, int layer, std::string local, std::vector<int64_t> shape, int pd,
                 std::vector<int64_t> ds_shape, int cat, bool wd) {
    const std::string ds = layer == 1 ? "tied_modules.embed." + local : std::to_string(layer) + "." + local;
    out.push_back(
        {std::move(canonical), ds, layer, std::move(local), std::move(shape), std::move(ds_shape), pd, cat, wd});
  };
  add("embedding.word_embeddings.weight", 1, "word_embeddings.weight", {padded_vocab, h}, 0, {padded_vocab, h}, 0,
      true);
  if (absolute) {
    const int64_t P = gi("max_position_embeddings");
    add("embedding.position_embeddings.weight", 1, "position_embeddings.weight", {P, h}, -1, {P, h}, -1, true);
  }
  if (c.value("embed_layernorm", false)) {
    add("embedding.norm.weight", 1, "word_embeddings.norm.weight", {h}, -1, {h}, -1, false);
    add("embedding.norm.bias", 1, "word_embeddings.norm.bias", {h}, -1, {h}, -1, false);
  }
  for (int64_t i = 0; i < L; ++i) {
    const int layer = static_cast<int>(3 + i);
    const std::string p = "layers." + std::to_string(i) + ".";
    add(p + "input_layernorm.weight", layer, "input_layernorm.weight", {h}, -1, {h}, -1, false);
    add(p + "input_layernorm.bias", layer, "input_layernorm.bias", {h}, -1, {h}, -1, false);
    add(p + "attention.qkv.weight", layer, "self_attention.query_key_value.weight", {np, 3, d, h}, 0, {np * 3 * d, h},
        0, true);
    add(p + "attention.qkv.bias", layer, "self_attention.query_key_value.bias", {np, 3, d}, 0, {np * 3 * d}, 0, false);
    add(p + "attention.dense.weight", layer, "self_attention.dense.weight", {h, np * d}, 1, {h, np * d}, 1, true);
    add(p + "attention.dense.bias", layer, "self_attention.dense.bias", {h}, -1, {h}, -1, false);
    add(p + "post_attention_layernorm.weight", layer, "post_attention_layernorm.weight", {h}, -1, {h}, -1, false);
    add(p + "post_attention_layernorm.bias", layer, "post_attention_layernorm.bias", {h}, -1, {h}, -1, false);
    if (glu) {
      add(p + "mlp.fc1.weight", layer, "mlp.dense_h_to_4h.weight", {2, f, h}, 1, {2 * f, h}, 0, true);
      add(p + "mlp.fc1.bias", layer, "mlp.dense_h_to_4h.bias", {2, f}, 1, {2 * f}, 0, false);
      out[out.size() - 2].n_sub_params = out[out.size() - 1].n_sub_params = 2;
    } else {
      add(p + "mlp.fc1.weight", layer, "mlp.dense_h_to_4h.weight", {f, h}, 0, {f, h}, 0, true);
      add(p + "mlp.fc1.bias", layer, "mlp.dense_h_to_4h.bias", {f}, 0, {f}, 0, false);
    }
    add(p + "mlp.fc2.weight", layer, "mlp.dense_4h_to_h.weight", {h, f}, 1, {h, f}, 1, true);
    add(p + "mlp.fc2.bias", layer, "mlp.dense_4h_to_h.bias", {h}, -1, {h}, -1, false);
  }
  const int fl = static_cast<int>(L + 4);
  add("final_layernorm.weight", fl, "weight", {h}, -1, {h}, -1, false);
  add("final_layernorm.bias", fl, "bias", {h}, -1, {h}, -1, false);
  return out;
}

}  // namespace megaton::checkpoint
