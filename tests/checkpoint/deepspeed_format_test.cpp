// torch .pt files without Python (pickle reader and writer, the zip archive) and the DeepSpeed universal checkpoint
// both ways: megaton -> universal -> megaton gives back every tensor bit for bit.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "checkpoint/deepspeed_layout.h"
#include "checkpoint/ds_universal_writer.h"
#include "checkpoint/file.h"
#include "checkpoint/foreign_import.h"
#include "checkpoint/fork_checkpoint.h"
#include "checkpoint/load_path.h"
#include "checkpoint/sections.h"
#include "checkpoint/serial_writer.h"
#include "checkpoint/torch_file.h"
#include "checkpoint/unpickler.h"
#include "core/error.h"
#include "core/remove_tree.h"

using namespace megaton;
using namespace megaton::checkpoint;
namespace fs = std::filesystem;
using K = PyNode::Kind;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/megaton_ds_XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { remove_tree(path); }
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(TorchFile, RoundTripsWhatCheckpointsHold) {
  TempDir d;
  const std::string f = d.path + "/state.pt";
  Py root = PyNode::new_dict();
  const auto w = torch::randn({4, 6});
  root->set("weight", PyNode::of_tensor(w));
  root->set("view", PyNode::of_tensor(w.t()));  // non-contiguous: written contiguous
  root->set("bf16", PyNode::of_tensor(torch::randn({3}).to(torch::kBFloat16)));
  root->set("ids", PyNode::of_tensor(torch::arange(5, torch::kInt64)));
  root->set("iteration", PyNode::integer(123456789012LL));
  root->set("negative", PyNode::integer(-70000));
  root->set("lr", PyNode::real(0.000123));
  root->set("flag", PyNode::boolean(true));
  root->set("nothing", PyNode::none());
  root->set("name", PyNode::string("héllo"));
  root->set("blob", PyNode::bytes(std::string("\x00\xff\x80z", 4)));
  root->set("shape", PyNode::tuple({PyNode::integer(2), PyNode::integer(3)}));
  Py ns = PyNode::new_dict();
  ns->set("hidden_size", PyNode::integer(64));
  ns->set("position_embedding_type", PyNode::record("megatron.enums.PositionEmbeddingType", {PyNode::integer(3)}));
  root->set("args", PyNode::record("argparse.Namespace", {}, ns));
  save_torch_file(f, root);

  const Py back = load_torch_file(f);
  EXPECT_TRUE(torch::equal(back->at("weight")->as_tensor(""), w));
  EXPECT_TRUE(torch::equal(back->at("view")->as_tensor(""), w.t()));
  EXPECT_EQ(back->at("bf16")->as_tensor("").scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(back->at("bf16")->as_tensor(""), root->at("bf16")->tensor));
  EXPECT_TRUE(torch::equal(back->at("ids")->as_tensor(""), torch::arange(5, torch::kInt64)));
  EXPECT_EQ(back->at("iteration")->as_int(""), 123456789012LL);
  EXPECT_EQ(back->at("negative")->as_int(""), -70000);
  EXPECT_EQ(back->at("lr")->as_float(""), 0.000123);
  EXPECT_TRUE(back->at("flag")->b);
  EXPECT_TRUE(back->at("nothing")->is(K::kNone));
  EXPECT_EQ(back->at("name")->as_str(""), "héllo");
  EXPECT_EQ(back->at("blob")->s, std::string("\x00\xff\x80z", 4));
  EXPECT_EQ(back->at("shape")->as_seq("").size(), 2u);
  const Py args = back->at("args");
  ASSERT_TRUE(args->is(K::kRecord));
  EXPECT_EQ(args->s, "argparse.Namespace");
  EXPECT_EQ(args->attr("hidden_size")->as_int(""), 64);
  EXPECT_EQ(args->attr("position_embedding_type")->items.at(0)->as_int(""), 3);
}

TEST(TorchFile, TruncatedForeignAndMissingFilesGiveClearErrors) {
  TempDir d;
  const std::string f = d.path + "/state.pt";
  Py root = PyNode::new_dict();
  root->set("w", PyNode::of_tensor(torch::randn({64, 64})));
  save_torch_file(f, root);
  const auto size = fs::file_size(f);
  fs::resize_file(f, size / 2);
  EXPECT_NE(error_of([&] { load_torch_file(f); }).find(f), std::string::npos);
  {
    std::ofstream out(d.path + "/text.pt");
    out << "not a checkpoint at all";
  }
  EXPECT_NE(error_of([&] { load_torch_file(d.path + "/text.pt"); }).find("not a torch.save zip archive"),
            std::string::npos);
  EXPECT_NE(error_of([&] { load_torch_file(d.path + "/missing.pt"); }).find("no such file"), std::string::npos);
  // A pickle that would run code: GLOBAL os.system, ('true',), REDUCE. Refused by name; nothing runs.
  const std::string evil = std::string("\x80\x02") + "cos\nsystem\n" + "X\x04\x00\x00\x00true\x85R.";
  const std::string msg = error_of([&] { unpickle(evil, {}, "evil.pkl"); });
  EXPECT_NE(msg.find("'os.system'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("never runs pickled code"), std::string::npos) << msg;
  // Malformed pickles: a truncated one and one with a bad memo index.
  EXPECT_NE(error_of([&] {
              unpickle(std::string("\x80\x02}q\x00"
                                   "X\x10\x00\x00\x00"
                                   "ab",
                                   12),
                       {}, "t.pkl");
            }).find("ends early"),
            std::string::npos);
  EXPECT_NE(error_of([&] { unpickle(std::string("\x80\x02h\x05.", 5), {}, "m.pkl"); }).find("memo"), std::string::npos);
}

TEST(TorchFile, RecursiveAndDeeplyNestedPicklesAreHandled) {
  // A list appended into itself (memo 0 recalled): refused, so no structure can hold a cycle.
  const std::string self = std::string(
      "\x80\x02"
      "]"
      "q\x00"
      "h\x00"
      "a"
      ".",
      9);
  EXPECT_NE(error_of([&] { unpickle(self, {}, "self.pkl"); }).find("into itself"), std::string::npos);
  // A list L0 put into L1, then modified (APPEND of 1 into L0): refused, as any change to a held value.
  const std::string later = std::string(
      "\x80\x02"
      "]"
      "q\x00"
      "]"
      "h\x00"
      "a"
      "h\x00"
      "K\x01"
      "a"
      ".",
      15);
  EXPECT_NE(error_of([&] { unpickle(later, {}, "later.pkl"); }).find("already held"), std::string::npos);
  // 200000 nested lists: read and freed without recursing per level; turning them into JSON stops at a depth limit.
  const int depth = 200000;
  std::string deep = "\x80\x02" + std::string(depth, ']') + std::string(depth - 1, 'a') + ".";
  Py v = unpickle(deep, {}, "deep.pkl");
  EXPECT_NE(error_of([&] { py_to_json(v); }).find("deeper than"), std::string::npos);
  v.reset();
}

TEST(DeepSpeedUniversal, MegatonToUniversalAndBackIsBitExact) {
  TempDir d;
  const nlohmann::json cfg = {{"num_layers", 2},
                              {"hidden_size", 16},
                              {"ffn_hidden_size", 64},
                              {"num_attention_heads", 4},
                              {"kv_channels", 4},
                              {"max_position_embeddings", 8},
                              {"vocab_size", 30},
                              {"position_embedding_type", "absolute"},
                              {"embed_layernorm", true},
                              {"glu_activation", ""},
                              {"openai_gelu", false},
                              {"no_bias_gelu_fusion", false},
                              {"apply_residual_connection_post_layernorm", false},
                              {"layernorm_epsilon", 1e-5},
                              {"untie_embeddings_and_output_weights", false},
                              {"mup", false},
                              {"mup_input_mult", 1.0},
                              {"mup_output_mult", 1.0},
                              {"mup_attn_mult", 1.0}};
  const int64_t padded = 32;
  const auto params = deepspeed_params(cfg, padded);
  std::map<std::string, torch::Tensor> model, master, m, v;
  {
    SerialWriter w(d.path + "/own", 7);
    auto add = [&](const std::string& path, const std::string& name, const torch::Tensor& t, int pd) {
      if (name == "embedding.word_embeddings.weight") {
        w.add_vocab_padded(path, t, 30, pd);
      } else {
        w.add(path, t, {{"partition_dim", pd}});
      }
    };
    for (const auto& p : params) {
      master[p.canonical] = torch::randn(p.canonical_shape);
      model[p.canonical] = master[p.canonical].to(torch::kBFloat16);
      m[p.canonical] = torch::randn(p.canonical_shape) * 1e-3;
      v[p.canonical] = torch::rand(p.canonical_shape) * 1e-6;
      add(model_path(p.canonical), p.canonical, model[p.canonical], p.partition_dim);
      add(optim_path("master", p.canonical), p.canonical, master[p.canonical], p.partition_dim);
      add(optim_path("exp_avg", p.canonical), p.canonical, m[p.canonical], p.partition_dim);
      add(optim_path("exp_avg_sq", p.canonical), p.canonical, v[p.canonical], p.partition_dim);
    }
    CheckpointState st;
    st.iteration = 7;
    st.model_config = cfg;
    st.args = {{"num_layers", 2},         {"hidden_size", 16},
               {"ffn_hidden_size", 64},   {"num_attention_heads", 4},
               {"kv_channels", 4},        {"max_position_embeddings", 8},
               {"seq_length", 8},         {"position_embedding_type", "absolute"},
               {"embed_layernorm", true}, {"bf16", true},
               {"optimizer", "adam"},     {"padded_vocab_size", padded}};
    st.state = {{"consumed_train_samples", 112},
                {"consumed_valid_samples", 0},
                {"consumed_train_tokens", 896},
                {"lr_scheduler", {{"max_lr", 1e-3}, {"num_steps", 7}, {"decay_style", "cosine"}}},
                {"optimizer", {{"optimizer", "adam"}, {"step", 7}, {"skipped_steps", 0}}}};
    w.finish(st, SavedLayout{1, 1, 1, 1}, "");
  }
  Logger log;
  const CheckpointFile own(resolve_checkpoint_path(d.path + "/own"));
  UniversalOptions o;
  o.target_tp = 2;
  o.target_pp = 2;
  o.layers_per_stage = {1, 1};
  write_ds_universal(own, d.path + "/univ", o, log);
  ASSERT_TRUE(fs::exists(d.path + "/univ/latest_universal"));
  ASSERT_TRUE(fs::exists(d.path + "/univ/global_step7_universal/mp_rank_03_model_states.pt"));
  ASSERT_TRUE(fs::exists(d.path + "/univ/global_step7_universal/layer_03-model_01-model_states.pt"));

  const auto fc = detect_foreign_checkpoint(d.path + "/univ");
  ASSERT_TRUE(fc.has_value());
  EXPECT_EQ(fc->format, ForeignFormat::kDeepSpeedUniversal);
  import_foreign_checkpoint(*fc, d.path + "/back", log);
  const CheckpointFile back(resolve_checkpoint_path(d.path + "/back"));
  EXPECT_EQ(back.iteration(), 7);
  EXPECT_EQ(back.meta().state["consumed_train_samples"], 112);
  EXPECT_EQ(back.meta().state["consumed_train_tokens"], 896);
  EXPECT_EQ(back.meta().state["optimizer"]["step"], 7);
  EXPECT_EQ(back.meta().state["lr_scheduler"]["decay_style"], "cosine");
  EXPECT_EQ(back.meta().model_config, cfg);
  for (const auto& path : own.tensor_paths()) {
    ASSERT_TRUE(back.has(path)) << path;
    const auto a = own.read(path), b = back.read(path);
    EXPECT_EQ(a.scalar_type(), b.scalar_type()) << path;
    EXPECT_TRUE(torch::equal(a, b)) << path;
  }
  EXPECT_EQ(own.tensor_paths().size(), back.tensor_paths().size());
  // The layer files hold TP slices: TP rank 1's QKV rows are heads 2 and 3.
  const Py layer = load_torch_file(d.path + "/univ/global_step7_universal/layer_03-model_01-model_states.pt");
  const auto qkv = layer->at("self_attention.query_key_value.weight")->as_tensor("");
  EXPECT_TRUE(torch::equal(qkv, model["layers.0.attention.qkv.weight"].narrow(0, 2, 2).reshape({24, 16})));
}
