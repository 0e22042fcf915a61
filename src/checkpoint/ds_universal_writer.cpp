#include "checkpoint/ds_universal_writer.h"

#include <unistd.h>

#include <filesystem>

#include "checkpoint/deepspeed_layout.h"
#include "checkpoint/fork_args.h"
#include "checkpoint/format.h"
#include "checkpoint/placement.h"
#include "checkpoint/sections.h"
#include "checkpoint/torch_file.h"
#include "checkpoint/tracker.h"
#include "core/error.h"
#include "core/remove_tree.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace megaton::checkpoint {

namespace {

Py size_of(const std::vector<int64_t>& shape) {
  std::vector<Py> dims;
  for (auto d : shape) dims.push_back(PyNode::integer(d));
  return PyNode::record("torch.Size", {PyNode::tuple(dims)});
}

/// The whole tensor at `path` (model/... or optim/...), vocabulary padding rows appended.
torch::Tensor read_padded(const CheckpointFile& f, const std::string& path) {
  torch::Tensor t = f.read(path);
  const std::string pad = path + kPaddingSuffix;
  if (f.has(pad)) t = torch::cat({t, f.read(pad)});
  return t;
}

/// The slice of canonical tensor `t` that TP rank `r` of `tp` holds, in DeepSpeed's local shape.
torch::Tensor slice_for(const DsParam& p, const torch::Tensor& t, int r, int tp) {
  if (p.partition_dim < 0) return t.reshape(p.ds_full_shape);
  const int64_t n = p.canonical_shape[p.partition_dim] / tp;
  std::vector<int64_t> local = p.ds_full_shape;
  local[p.ds_cat_dim] /= tp;
  return t.narrow(p.partition_dim, r * n, n).reshape(local).contiguous();
}

Py namespace_of(const json& args) {
  Py state = PyNode::new_dict();
  for (const auto& [k, v] : args.items()) {
    if (k == "position_embedding_type" && v.is_string()) {
      const int64_t e = position_embedding_enum(v.get<std::string>());
      state->set(k, PyNode::record("megatron.enums.PositionEmbeddingType", {PyNode::integer(e)}));
      continue;
    }
    state->set(k, json_to_py(v));
  }
  return PyNode::record("argparse.Namespace", {}, state);
}

}  // namespace

std::string write_ds_universal(const CheckpointFile& src, const std::string& save_root, const UniversalOptions& o,
                               const Logger& log) {
  const CheckpointState& meta = src.meta();
  const json& cfg = meta.model_config;
  const std::string emb = model_path("embedding.word_embeddings.weight");
  MEGATON_CHECK(src.has(emb), CheckpointError, src.path(), ": no word embedding");
  const int64_t vocab = cfg.at("vocab_size").get<int64_t>();
  const int64_t padded = src.manifest()["tensors"][emb].value("padded_rows", vocab);
  const auto params = deepspeed_params(cfg, padded);
  for (const char* s : {"master", "exp_avg", "exp_avg_sq"})
    MEGATON_CHECK(src.has(optim_path(s, params[0].canonical)), CheckpointError, src.path(), ": has no Adam state ('",
                  optim_path(s, params[0].canonical),
                  "'); a universal checkpoint needs the fp32 weights and both moments");
  const int64_t L = cfg.at("num_layers").get<int64_t>();
  const int tp = o.target_tp, pp = o.target_pp;
  // The layer files hold TP slices: every split dimension (heads, ffn, padded vocabulary rows) must divide.
  for (const auto& p : params)
    MEGATON_CHECK(p.partition_dim < 0 || p.canonical_shape[p.partition_dim] % tp == 0, UsageError, "--target-tp ", tp,
                  " does not divide dimension ", p.partition_dim, " of '", p.canonical, "' ",
                  shape_str(p.canonical_shape));
  MEGATON_CHECK(static_cast<int>(o.layers_per_stage.size()) == pp, InternalError,
                "universal writer: ", o.layers_per_stage.size(), " stage sizes for PP=", pp);

  const std::string name = "global_step" + std::to_string(meta.iteration) + "_universal";
  const fs::path final_dir = fs::path(save_root) / name;
  const fs::path dir = fs::path(save_root) / (name + ".tmp-" + std::to_string(::getpid()));
  fs::create_directories(dir / "zero");
  const json& st = meta.state;
  const json opt = st.value("optimizer", json::object());
  const int64_t step = opt.value("step", meta.iteration);

  // ~~~ zero/<param>/: the whole fp32 weights and moments ~~~
  for (const auto& p : params) {
    const fs::path folder = dir / "zero" / p.ds_name;
    fs::create_directories(folder);
    for (const auto& [state, file] :
         {std::pair{"master", "fp32"}, {"exp_avg", "exp_avg"}, {"exp_avg_sq", "exp_avg_sq"}}) {
      const torch::Tensor t = read_padded(src, optim_path(state, p.canonical)).to(torch::kFloat32);
      Py d = PyNode::new_dict();
      d->set("param", PyNode::of_tensor(t.reshape(p.ds_full_shape).contiguous()));
      if (p.ds_cat_dim >= 0) d->set("cat_dim", PyNode::integer(p.ds_cat_dim));
      if (p.n_sub_params > 1) d->set("param_n_sub_params", PyNode::integer(p.n_sub_params));
      if (p.canonical == "embedding.word_embeddings.weight")
        d->set("vocab_divisibility_padding_tensor",
               PyNode::of_tensor(padded > vocab ? t[padded - 1].clone() : torch::zeros({t.size(1)})));
      save_torch_file((folder / (std::string(file) + ".pt")).string(), d);
    }
    save_torch_file((folder / "step.pt").string(), PyNode::of_tensor(torch::tensor(static_cast<float>(step))));
  }

  // ~~~ the model-state files of the target layout ~~~
  // The fork's args carry the architecture (megaton keeps it in model_config).
  json args = meta.args;
  for (const char* k : {"num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "kv_channels",
                        "max_position_embeddings", "position_embedding_type", "embed_layernorm", "openai_gelu",
                        "apply_residual_connection_post_layernorm", "layernorm_epsilon"})
    if (cfg.contains(k)) args[k] = cfg[k];
  const std::string glu = cfg.value("glu_activation", std::string());
  args["glu_activation"] = glu.empty() ? json(nullptr) : json(glu);
  args["bias_gelu_fusion"] = !cfg.value("no_bias_gelu_fusion", false);
  args["tensor_model_parallel_size"] = tp;
  args["pipeline_model_parallel_size"] = pp;
  args["padded_vocab_size"] = padded;
  for (const char* k : {"consumed_train_samples", "consumed_valid_samples", "consumed_train_tokens"})
    args[k] = st.value(k, int64_t{0});
  const Py ns = namespace_of(args);
  std::vector<int> first_layer(pp + 1, 0);
  for (int s = 0; s < pp; ++s) first_layer[s + 1] = first_layer[s] + o.layers_per_stage[s];
  MEGATON_CHECK(first_layer[pp] == L, UsageError, "the target pipeline stages hold ", first_layer[pp], " layers of ",
                L);
  auto stage_has = [&](const DsParam& p, int s) {
    if (p.layer == 1) return s == 0 || s == pp - 1;  // the tied embedding module lives on both ends
    if (p.layer == ds_final_norm_layer(L)) return s == pp - 1;
    const int i = p.layer - 3;
    return i >= first_layer[s] && i < first_layer[s + 1];
  };
  for (int s = 0; s < pp; ++s)
    for (int t = 0; t < tp; ++t) {
      Py wd = PyNode::new_dict(), no_wd = PyNode::new_dict();
      for (const auto& p : params) {
        if (!stage_has(p, s)) continue;
        std::vector<int64_t> local = p.ds_full_shape;
        if (p.ds_cat_dim >= 0) local[p.ds_cat_dim] /= tp;
        (p.weight_decay ? wd : no_wd)->set(p.ds_name, size_of(local));
      }
      Py m = PyNode::new_dict();
      m->set("module", PyNode::none());
      m->set("buffer_names", PyNode::list());
      m->set("optimizer", PyNode::none());
      m->set("param_shapes", PyNode::list({wd, no_wd}));
      m->set("lr_scheduler", json_to_py(st.value("lr_scheduler", json::object())));
      m->set("sparse_tensor_module_names", PyNode::list());
      m->set("skipped_steps", PyNode::integer(opt.value("skipped_steps", int64_t{0})));
      m->set("global_steps", PyNode::integer(meta.iteration));
      m->set("global_samples", PyNode::integer(st.value("consumed_train_samples", int64_t{0})));
      m->set("dp_world_size", PyNode::integer(1));
      m->set("mp_world_size", PyNode::integer(tp * pp));
      m->set("args", ns);
      m->set("checkpoint_version", PyNode::real(3.0));
      m->set("iteration", PyNode::integer(meta.iteration));
      m->set("tokens", PyNode::integer(st.value("consumed_train_tokens", int64_t{0})));
      Py info = PyNode::new_dict();
      info->set("padded_vocab_size", PyNode::integer(padded));
      info->set("original_vocab_size", PyNode::integer(vocab));
      m->set("checkpoint_info", info);
      char b[64];
      std::snprintf(b, sizeof b, "mp_rank_%02d_model_states.pt", s * tp + t);
      save_torch_file((dir / b).string(), m);
    }
  std::map<int, std::vector<const DsParam*>> by_layer;
  for (const auto& p : params) by_layer[p.layer].push_back(&p);
  for (const auto& [layer, ps] : by_layer)
    for (int t = 0; t < tp; ++t) {
      Py sd = PyNode::new_dict();
      for (const DsParam* p : ps)
        sd->set(p->local_name, PyNode::of_tensor(slice_for(*p, read_padded(src, model_path(p->canonical)), t, tp)));
      char b[80];
      std::snprintf(b, sizeof b, "layer_%02d-model_%02d-model_states.pt", layer, t);
      save_torch_file((dir / b).string(), sd);
    }

  // ~~~ publish ~~~
  if (fs::exists(final_dir)) remove_tree(final_dir.string());
  fs::rename(dir, final_dir);
  write_file_atomic(save_root, "latest_universal", name + "\n");
  log.info("convert: ", src.path(), " (iteration ", meta.iteration, ") -> DeepSpeed universal checkpoint ",
           final_dir.string(), " (", params.size(), " parameters; model files for TP=", tp, " PP=", pp, ")");
  return final_dir.string();
}

}  // namespace megaton::checkpoint
