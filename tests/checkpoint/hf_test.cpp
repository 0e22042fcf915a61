// safetensors read/write and the megaton <-> Hugging Face parameter mapping: the documented HF layouts are checked
// element by element on tensors whose values encode their own indices, and both directions must round-trip.
#include "checkpoint/hf.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <tuple>

#include "checkpoint/safetensors.h"
#include "core/error.h"
#include "core/remove_tree.h"
#include "model/gpt_config.h"
#include "train/training_state.h"

using namespace megaton;
using namespace megaton::checkpoint;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const int64_t kL = 2, kH = 8, kNp = 2, kHd = 4, kF = 32, kV = 11, kPos = 6;

json config(const std::string& pos) {
  return {{"num_layers", kL},
          {"hidden_size", kH},
          {"num_attention_heads", kNp},
          {"kv_channels", kHd},
          {"ffn_hidden_size", kF},
          {"max_position_embeddings", kPos},
          {"position_embedding_type", pos},
          {"embed_layernorm", pos == "alibi"},
          {"glu_activation", ""},
          {"openai_gelu", false},
          {"no_bias_gelu_fusion", false},
          {"layernorm_epsilon", 1e-5},
          {"vocab_size", kV}};
}

/// Canonical tensors whose value at [i0, i1, ...] is a unique code of (name, indices).
std::map<std::string, torch::Tensor> canonical(bool bloom) {
  std::map<std::string, torch::Tensor> m;
  int salt = 0;
  auto add = [&](const std::string& n, std::vector<int64_t> shape) {
    int64_t numel = 1;
    for (auto s : shape) numel *= s;
    m[n] = (torch::arange(numel, torch::kFloat64) + 100000.0 * ++salt).reshape(shape);
  };
  add("embedding.word_embeddings.weight", {kV, kH});
  if (bloom) {
    add("embedding.norm.weight", {kH});
    add("embedding.norm.bias", {kH});
  } else {
    add("embedding.position_embeddings.weight", {kPos, kH});
  }
  for (int i = 0; i < kL; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    for (const char* ln : {"input_layernorm", "post_attention_layernorm"}) {
      add(p + ln + ".weight", {kH});
      add(p + ln + ".bias", {kH});
    }
    add(p + "attention.qkv.weight", {kNp, 3, kHd, kH});
    add(p + "attention.qkv.bias", {kNp, 3, kHd});
    add(p + "attention.dense.weight", {kH, kNp * kHd});
    add(p + "attention.dense.bias", {kH});
    add(p + "mlp.fc1.weight", {kF, kH});
    add(p + "mlp.fc1.bias", {kF});
    add(p + "mlp.fc2.weight", {kH, kF});
    add(p + "mlp.fc2.bias", {kH});
  }
  add("final_layernorm.weight", {kH});
  add("final_layernorm.bias", {kH});
  return m;
}

std::map<std::string, torch::Tensor> as_map(const NamedTensors& v) {
  std::map<std::string, torch::Tensor> m;
  for (const auto& [n, t] : v) m[n] = t;
  return m;
}

}  // namespace

TEST(CheckpointSafetensors, RoundTripsAndRefusesTruncation) {
  const std::string path = (fs::temp_directory_path() / ("megaton_st_" + std::to_string(::getpid()))).string();
  NamedTensors in = {{"a", torch::arange(6, torch::kFloat32).reshape({2, 3})},
                     {"b.weight", torch::randn({5}).to(torch::kBFloat16)},
                     {"c", torch::arange(4, torch::kInt64)}};
  write_safetensors(path, in, {{"format", "pt"}});
  // The layout: 8-byte little-endian header length, JSON header padded to 8 bytes, then data in order.
  std::ifstream f(path, std::ios::binary);
  uint64_t len = 0;
  f.read(reinterpret_cast<char*>(&len), 8);
  std::string header(len, '\0');
  f.read(header.data(), len);
  EXPECT_EQ(len % 8, 0u);
  const json h = json::parse(header);
  EXPECT_EQ(h["a"]["dtype"], "F32");
  EXPECT_EQ(h["a"]["data_offsets"], json::array({0, 24}));
  EXPECT_EQ(h["b.weight"]["dtype"], "BF16");
  EXPECT_EQ(h["b.weight"]["data_offsets"], json::array({24, 34}));
  EXPECT_EQ(h["__metadata__"]["format"], "pt");
  const auto out = read_safetensors(path);
  ASSERT_EQ(out.size(), 3u);
  for (const auto& [n, t] : in) EXPECT_TRUE(torch::equal(out.at(n), t)) << n;
  fs::resize_file(path, fs::file_size(path) - 3);
  try {
    read_safetensors(path);
    FAIL() << "truncated file accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'c'"), std::string::npos) << e.what();
  }
  fs::remove(path);
}

TEST(CheckpointHf, Gpt2LayoutIsHuggingFaces) {
  const auto can = canonical(false);
  const json cfg = config("absolute");
  ASSERT_EQ(choose_hf_arch(cfg, "auto"), HfArch::kGpt2);
  const auto hf = as_map(to_hf([&](const std::string& n) { return can.at(n); }, cfg, HfArch::kGpt2));
  const auto& qkv = can.at("layers.1.attention.qkv.weight");         // [np, 3, hd, h]
  const auto& c_attn = hf.at("transformer.h.1.attn.c_attn.weight");  // [h, 3h], Conv1D [in, out]
  ASSERT_EQ(c_attn.sizes().vec(), (std::vector<int64_t>{kH, 3 * kNp * kHd}));
  for (int n = 0; n < kNp; ++n)
    for (int w = 0; w < 3; ++w)
      for (int d = 0; d < kHd; ++d)
        for (int i = 0; i < kH; ++i)
          ASSERT_EQ(c_attn[i][w * kNp * kHd + n * kHd + d].item<double>(), qkv[n][w][d][i].item<double>());
  const auto& bias = hf.at("transformer.h.1.attn.c_attn.bias");
  const auto& qb = can.at("layers.1.attention.qkv.bias");
  for (int n = 0; n < kNp; ++n)
    for (int w = 0; w < 3; ++w)
      for (int d = 0; d < kHd; ++d)
        ASSERT_EQ(bias[w * kNp * kHd + n * kHd + d].item<double>(), qb[n][w][d].item<double>());
  EXPECT_TRUE(torch::equal(hf.at("transformer.h.0.mlp.c_fc.weight"), can.at("layers.0.mlp.fc1.weight").t()));
  EXPECT_TRUE(torch::equal(hf.at("transformer.h.0.attn.c_proj.weight"), can.at("layers.0.attention.dense.weight").t()));
  EXPECT_TRUE(torch::equal(hf.at("transformer.wte.weight"), can.at("embedding.word_embeddings.weight")));
  EXPECT_TRUE(torch::equal(hf.at("transformer.ln_f.bias"), can.at("final_layernorm.bias")));
  // config.json and the way back.
  const json hc = hf_config(cfg, HfArch::kGpt2, torch::kFloat32);
  EXPECT_EQ(hc["n_embd"], kH);
  EXPECT_EQ(hc["n_inner"], kF);
  EXPECT_EQ(hc["activation_function"], "gelu_new");
  auto weights = hf;
  weights["lm_head.weight"] = hf.at("transformer.wte.weight");  // tied: accepted and skipped
  const Imported im = from_hf(hc, weights, "dir");
  EXPECT_EQ(im.tensors.size(), can.size());
  for (const auto& [n, t, pd] : im.tensors) EXPECT_TRUE(torch::equal(t, can.at(n))) << n;
  for (const char* k : {"num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size", "vocab_size"})
    EXPECT_EQ(im.model_config[k], cfg[k]) << k;
  EXPECT_EQ(im.unused, std::vector<std::string>{"lm_head.weight"});
}

TEST(CheckpointHf, BloomLayoutIsHuggingFaces) {
  const auto can = canonical(true);
  const json cfg = config("alibi");
  ASSERT_EQ(choose_hf_arch(cfg, "auto"), HfArch::kBloom);
  const auto hf = as_map(to_hf([&](const std::string& n) { return can.at(n); }, cfg, HfArch::kBloom));
  const auto& qkv = can.at("layers.0.attention.qkv.weight");
  const auto& w = hf.at("transformer.h.0.self_attention.query_key_value.weight");  // [3h, h], rows [np, 3, hd]
  for (int n = 0; n < kNp; ++n)
    for (int k = 0; k < 3; ++k)
      for (int d = 0; d < kHd; ++d) ASSERT_TRUE(torch::equal(w[n * 3 * kHd + k * kHd + d], qkv[n][k][d]));
  EXPECT_TRUE(torch::equal(hf.at("transformer.word_embeddings_layernorm.weight"), can.at("embedding.norm.weight")));
  EXPECT_TRUE(torch::equal(hf.at("transformer.h.1.mlp.dense_4h_to_h.weight"), can.at("layers.1.mlp.fc2.weight")));
  const Imported im = from_hf(hf_config(cfg, HfArch::kBloom, torch::kFloat32), hf, "dir");
  for (const auto& [n, t, pd] : im.tensors) EXPECT_TRUE(torch::equal(t, can.at(n))) << n;
  EXPECT_EQ(im.model_config["position_embedding_type"], "alibi");
  EXPECT_EQ(im.model_config["embed_layernorm"], true);
  EXPECT_EQ(im.model_config["max_position_embeddings"], kPos);  // carried through config.json's seq_length
  json hub = hf_config(cfg, HfArch::kBloom, torch::kFloat32);
  hub.erase("seq_length");  // a hub BLOOM config: the training length 2048
  EXPECT_EQ(from_hf(hub, hf, "dir").model_config["max_position_embeddings"], 2048);
}

TEST(CheckpointHf, RefusesWhatDoesNotFit) {
  json glu = config("absolute");
  glu["glu_activation"] = "swiglu";
  EXPECT_THROW(choose_hf_arch(glu, "gpt2"), UsageError);
  EXPECT_THROW(choose_hf_arch(config("rotary"), "auto"), UsageError);
  EXPECT_THROW(choose_hf_arch(config("absolute"), "bloom"), UsageError);
  // A missing weight is named.
  const auto can = canonical(false);
  auto hf = as_map(to_hf([&](const std::string& n) { return can.at(n); }, config("absolute"), HfArch::kGpt2));
  hf.erase("transformer.h.1.mlp.c_proj.bias");
  try {
    from_hf(hf_config(config("absolute"), HfArch::kGpt2, torch::kFloat32), hf, "dir");
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("'transformer.h.1.mlp.c_proj.bias' is missing"), std::string::npos);
  }
  // Hostile sizes: a data error naming the key, before any arithmetic or allocation uses them.
  const auto full = as_map(to_hf([&](const std::string& n) { return can.at(n); }, config("absolute"), HfArch::kGpt2));
  for (const auto& [key, value, expected] :
       std::vector<std::tuple<std::string, int64_t, std::string>>{{"n_head", 0, "num_attention_heads is 0"},
                                                                  {"n_embd", -8, "hidden_size is -8"},
                                                                  {"n_layer", 1000000000, "1000000000 layers"},
                                                                  {"n_head", 3, "not divisible by the 3"}}) {
    json bad = hf_config(config("absolute"), HfArch::kGpt2, torch::kFloat32);
    bad[key] = value;
    try {
      from_hf(bad, full, "dir");
      ADD_FAILURE() << key << " " << value << " accepted";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
}

// The model config a training run stores says which GELU it trained with, and the HF export follows it: Megatron's
// unfused bias-GELU (--no-bias-gelu-fusion) is the exact erf GELU, "gelu" in HF; the default fused one and
// --openai-gelu are the tanh approximation, "gelu_new". A stored config without the key exports gelu_new.
TEST(CheckpointHf, StoredModelConfigCarriesTheGeluForTheExport) {
  model::GptConfig c;
  c.model.num_layers = 2, c.model.hidden_size = 8, c.model.num_attention_heads = 2, c.model.kv_channels = 4;
  c.model.ffn_hidden_size = 32, c.model.max_position_embeddings = 16;
  c.vocab_size = 50;
  const auto activation = [&] {
    return hf_config(model::architecture_json(c), HfArch::kGpt2, torch::kFloat32).at("activation_function");
  };
  EXPECT_EQ(activation(), "gelu_new");
  c.model.bias_gelu_fusion = false;
  EXPECT_EQ(model::architecture_json(c).at("no_bias_gelu_fusion"), true);
  EXPECT_EQ(activation(), "gelu");
  c.model.openai_gelu = true;  // the tanh approximation whatever the fusion flag says
  EXPECT_EQ(model::architecture_json(c).at("no_bias_gelu_fusion"), false);
  EXPECT_EQ(activation(), "gelu_new");
  c.model.openai_gelu = false;
  c.model.glu_activation = "swiglu";  // no GELU at all: the flag must not make a load refuse either way
  EXPECT_EQ(model::architecture_json(c).at("no_bias_gelu_fusion"), false);
}

namespace {
/// Writes a safetensors file of `header` (JSON text) followed by `data_bytes` zero bytes.
void write_raw_safetensors(const std::string& path, const std::string& header, size_t data_bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  const uint64_t len = header.size();
  f.write(reinterpret_cast<const char*>(&len), 8);
  f.write(header.data(), static_cast<std::streamsize>(len));
  const std::string zeros(data_bytes, '\0');
  f.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
}

std::string read_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(CheckpointSafetensors, RefusesOverlapsHostileShapesAndEscapingShardNames) {
  const fs::path dir = fs::temp_directory_path() / ("megaton_sth_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string p = (dir / "x.safetensors").string();
  // Two tensors over the same bytes.
  write_raw_safetensors(p,
                        R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                        16);
  EXPECT_NE(read_error([&] { read_safetensors(p); }).find("overlap"), std::string::npos);
  // A shape far larger than the file is refused before anything is allocated.
  write_raw_safetensors(p, R"({"a":{"dtype":"F32","shape":[1000000000000,1000000],"data_offsets":[0,16]}})", 16);
  EXPECT_NE(read_error([&] { read_safetensors(p); }).find("larger than the file"), std::string::npos);
  // An index naming a shard outside its directory.
  std::ofstream(dir / "model.safetensors.index.json") << R"({"weight_map":{"a":"../../etc/passwd"}})";
  const std::string e = read_error([&] { read_hf_weights(dir.string()); });
  EXPECT_NE(e.find("expected the file name of a shard"), std::string::npos) << e;
  std::ofstream(dir / "model.safetensors.index.json") << R"({"nothing":1})";
  EXPECT_NE(read_error([&] { read_hf_weights(dir.string()); }).find("weight_map"), std::string::npos);
  megaton::remove_tree(dir);
}

TEST(CheckpointSafetensors, NeverWritesThroughAPlantedLink) {
  const fs::path dir = fs::temp_directory_path() / ("megaton_stl_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path victim = dir / "victim.txt";
  std::ofstream(victim) << "precious";
  // A link planted at the temporary's name: the write replaces the link, never the victim.
  fs::create_symlink(victim, dir / "out.safetensors.tmp");
  write_safetensors((dir / "out.safetensors").string(), {{"a", torch::ones({2})}}, {});
  std::ifstream in(victim);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "precious");
  EXPECT_EQ(read_safetensors((dir / "out.safetensors").string()).size(), 1u);
  // An output that is itself a link is refused.
  fs::create_symlink(victim, dir / "linked.safetensors");
  EXPECT_THROW(write_safetensors((dir / "linked.safetensors").string(), {{"a", torch::ones({2})}}, {}), RuntimeError);
  megaton::remove_tree(dir);
}
