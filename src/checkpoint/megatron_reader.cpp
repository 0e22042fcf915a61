// Megatron's own checkpoints (the fork without --deepspeed): iter_NNNNNNN/mp_rank_TT[_SSS]/model_optim_rng.pt, one
// per TP rank TT and pipeline stage SSS, written by data-parallel rank 0:
//   model         {language_model: {embedding: {word_embeddings: {weight[, norm.*]}, position_embeddings: {weight}},
//                  encoder: {layers.<local>.*, final_layernorm.*}}, word_embeddings_for_head: {weight} (last stage)}
//   optimizer     {optimizer: torch Adam state_dict (state by parameter index, param_groups), fp32_from_fp16_params:
//                  the fp32 masters per group, grad_scaler} with --fp16/--bf16; the torch state_dict alone in fp32
//   lr_scheduler, args, iteration, checkpoint_version (the fused QKV's row order), RNG states
// The optimizer's parameter order is the fork's _get_params_for_weight_decay_optimization: modules in order, LayerNorm
// parameters and biases without weight decay, the other weights with it, the latter split in two halves.
#include <filesystem>

#include "checkpoint/fork_common.h"
#include "checkpoint/torch_file.h"
#include "core/error.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace megaton::checkpoint {

namespace {

using K = PyNode::Kind;

struct Entry {
  const DsParam* p;
  bool weight_decay;
  std::string key;  // path in the model state dict: "embedding/word_embeddings/weight", "encoder/layers.0.x"
};

/// The parameters of pipeline stage `s` of `pp` in the fork's optimizer order (weight decay ones first, two halves,
/// then the others), each with its key in the model state dict.
std::vector<std::vector<Entry>> optimizer_groups(const std::vector<DsParam>& params, int64_t L, int s, int pp) {
  const bool first = s == 0, last = s == pp - 1;
  const int64_t per = L / pp, lo = s * per, hi = lo + per;
  std::vector<Entry> order;  // module traversal order
  auto find = [&](const std::string& canonical) -> const DsParam* {
    for (const auto& p : params)
      if (p.canonical == canonical) return &p;
    return nullptr;
  };
  auto add = [&](const std::string& canonical, bool wd, const std::string& key) {
    if (const DsParam* p = find(canonical)) order.push_back({p, wd, key});
  };
  if (first) {
    add("embedding.word_embeddings.weight", true, "embedding/word_embeddings/weight");
    add("embedding.norm.weight", false, "embedding/word_embeddings/norm.weight");
    add("embedding.norm.bias", false, "embedding/word_embeddings/norm.bias");
    add("embedding.position_embeddings.weight", true, "embedding/position_embeddings/weight");
  }
  for (int64_t i = lo; i < hi; ++i) {
    const std::string c = "layers." + std::to_string(i) + ".", k = "encoder/layers." + std::to_string(i - lo) + ".";
    add(c + "input_layernorm.weight", false, k + "input_layernorm.weight");
    add(c + "input_layernorm.bias", false, k + "input_layernorm.bias");
    add(c + "attention.qkv.weight", true, k + "self_attention.query_key_value.weight");
    add(c + "attention.qkv.bias", false, k + "self_attention.query_key_value.bias");
    add(c + "attention.dense.weight", true, k + "self_attention.dense.weight");
    add(c + "attention.dense.bias", false, k + "self_attention.dense.bias");
    add(c + "post_attention_layernorm.weight", false, k + "post_attention_layernorm.weight");
    add(c + "post_attention_layernorm.bias", false, k + "post_attention_layernorm.bias");
    add(c + "mlp.fc1.weight", true, k + "mlp.dense_h_to_4h.weight");
    add(c + "mlp.fc1.bias", false, k + "mlp.dense_h_to_4h.bias");
    add(c + "mlp.fc2.weight", true, k + "mlp.dense_4h_to_h.weight");
    add(c + "mlp.fc2.bias", false, k + "mlp.dense_4h_to_h.bias");
  }
  if (last) {
    add("final_layernorm.weight", false, "encoder/final_layernorm.weight");
    add("final_layernorm.bias", false, "encoder/final_layernorm.bias");
    if (!first) add("embedding.word_embeddings.weight", true, "word_embeddings_for_head/weight");
  }
  std::vector<Entry> wd, no_wd;
  for (const auto& e : order) (e.weight_decay ? wd : no_wd).push_back(e);
  const size_t half = wd.size() / 2;
  return {std::vector<Entry>(wd.begin(), wd.begin() + half), std::vector<Entry>(wd.begin() + half, wd.end()), no_wd};
}

/// A model tensor by its key ("embedding/word_embeddings/weight"): nested dicts, the last part a flat state-dict key.
torch::Tensor model_tensor(const Py& model, const std::string& key, const std::string& where) {
  if (key.rfind("word_embeddings_for_head/", 0) == 0)
    return model->at("word_embeddings_for_head", where)->at("weight", where)->as_tensor(where + " head weight");
  const Py lm = model->at("language_model", where);
  Py node = lm;
  size_t pos = 0;
  while (true) {
    const size_t slash = key.find('/', pos);
    if (slash == std::string::npos) break;
    std::string part = key.substr(pos, slash - pos);
    Py next = node->get(part);
    if (!next && part == "encoder") next = node->get("transformer");  // older checkpoints' name
    MEGATON_CHECK(next, CheckpointError, where, ": the model state has no '", part, "'");
    node = next;
    pos = slash + 1;
  }
  const std::string leaf = key.substr(pos);
  return node->at(leaf, where)->as_tensor(where + " '" + key + "'");
}

/// The fused QKV rows of checkpoint_version < 2 in version 3's [np, 3, hn] order (megatron/checkpointing.py's
/// fix_query_key_value_ordering): version 0 stored [3, np, hn], version 1 [np, hn, 3].
torch::Tensor fix_qkv(const torch::Tensor& t, double version, int64_t np_local, int64_t hn) {
  if (version >= 2.0) return t;
  const auto rest = t.sizes().slice(1).vec();
  std::vector<int64_t> shape;
  torch::Tensor r;
  if (version == 0) {
    shape = {3, np_local, hn};
    shape.insert(shape.end(), rest.begin(), rest.end());
    r = t.reshape(shape).transpose(0, 1);
  } else {
    shape = {np_local, hn, 3};
    shape.insert(shape.end(), rest.begin(), rest.end());
    r = t.reshape(shape).transpose(1, 2);
  }
  return r.contiguous().reshape(t.sizes());
}

}  // namespace

void fork::read_megatron(const ForeignCheckpoint& fc, const Meta& mm, ForeignState& out, const Logger& log) {
  const fs::path dir(fc.dir);
  int tp = 0, pp = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("mp_rank_", 0) != 0 || !fs::exists(e.path() / "model_optim_rng.pt")) continue;
    if (n.size() == 10) {  // mp_rank_TT
      tp = std::max(tp, std::stoi(n.substr(8, 2)) + 1);
      pp = std::max(pp, 1);
    } else if (n.size() == 14) {  // mp_rank_TT_SSS
      tp = std::max(tp, std::stoi(n.substr(8, 2)) + 1);
      pp = std::max(pp, std::stoi(n.substr(11, 3)) + 1);
    }
  }
  MEGATON_CHECK(tp > 0, CheckpointError, fc.dir, ": no mp_rank_XX/model_optim_rng.pt");
  out.layout = SavedLayout{tp, pp, 1, tp * pp};
  const json& cfg = out.meta.model_config;
  const int64_t L = cfg.at("num_layers").get<int64_t>();
  MEGATON_CHECK(L % pp == 0, CheckpointError, fc.dir, ": ", L, " layers over ", pp, " pipeline stages");
  const auto params = deepspeed_params(cfg, out.padded_vocab);
  const int64_t np_local = cfg.at("num_attention_heads").get<int64_t>() / tp, hn = cfg.at("kv_channels").get<int64_t>();
  const double version = mm.root->get("checkpoint_version") ? mm.root->at("checkpoint_version")->as_float(fc.dir) : 0;
  log.info("convert: ", fc.what(), ": TP=", tp, " PP=", pp, ", checkpoint_version ", version, ", ", params.size(),
           " parameters");

  std::map<std::string, std::vector<torch::Tensor>> weights, master, m1, m2;  // canonical -> per TP rank
  bool have_optim = true;
  int64_t step = -1;
  json scaler;
  for (int s = 0; s < pp; ++s)
    for (int t = 0; t < tp; ++t) {
      char b[32];
      if (pp == 1)
        std::snprintf(b, sizeof b, "mp_rank_%02d", t);
      else
        std::snprintf(b, sizeof b, "mp_rank_%02d_%03d", t, s);
      const std::string f = (dir / b / "model_optim_rng.pt").string();
      const Py root = load_torch_file(f);
      const Py model = root->at("model", f);
      const auto groups = optimizer_groups(params, L, s, pp);
      auto put = [&](std::map<std::string, std::vector<torch::Tensor>>& into, const Entry& e, torch::Tensor x) {
        auto& v = into[e.p->canonical];
        if (v.size() < static_cast<size_t>(tp)) v.resize(tp);
        if (e.p->canonical.find("attention.qkv") != std::string::npos) x = fix_qkv(x, version, np_local, hn);
        if (!v[t].defined()) v[t] = x;  // the tied embedding: the first stage's copy
      };
      for (const auto& g : groups)
        for (const auto& e : g) put(weights, e, model_tensor(model, e.key, f));
      const Py opt = root->get("optimizer");
      if (!opt || !opt->is(K::kDict)) {
        have_optim = false;
        continue;
      }
      const Py torch_sd = opt->get("optimizer") ? opt->at("optimizer", f) : opt;  // fp32: the torch state_dict alone
      const Py state = torch_sd->at("state", f);
      const auto& pgroups = torch_sd->at("param_groups", f)->as_seq(f + " param_groups");
      const Py masters = opt->get("fp32_from_fp16_params");
      MEGATON_CHECK(pgroups.size() == groups.size(), CheckpointError, f, ": ", pgroups.size(),
                    " optimizer parameter groups, the fork's GPT has ", groups.size(),
                    " (a model or optimizer megaton does not know?)");
      for (size_t gi = 0; gi < groups.size(); ++gi) {
        const auto& ids = pgroups[gi]->at("params", f)->as_seq(f + " params");
        MEGATON_CHECK(ids.size() == groups[gi].size(), CheckpointError, f, ": optimizer group ", gi, " holds ",
                      ids.size(), " parameters, the model's has ", groups[gi].size());
        if (Py gs = pgroups[gi]->get("step")) step = int_of(gs, f + " step");
        for (size_t j = 0; j < ids.size(); ++j) {
          const Entry& e = groups[gi][j];
          const int64_t id = ids[j]->as_int(f + " params");
          Py ps;
          for (const auto& [k, v] : state->dict)
            if (k->is(K::kInt) && k->i == id) ps = v;
          MEGATON_CHECK(ps, CheckpointError, f, ": no Adam state for parameter ", id, " ('", e.key, "')");
          put(m1, e, ps->at("exp_avg", f)->as_tensor(f + " exp_avg").to(torch::kFloat32));
          put(m2, e, ps->at("exp_avg_sq", f)->as_tensor(f + " exp_avg_sq").to(torch::kFloat32));
          if (Py st = ps->get("step")) step = int_of(st, f + " step");
          torch::Tensor w = masters ? masters->as_seq(f)[gi]->as_seq(f).at(j)->as_tensor(f + " fp32_from_fp16_params")
                                    : model_tensor(model, e.key, f);
          put(master, e, w.to(torch::kFloat32));
        }
      }
      if (Py gs = opt->get("grad_scaler"); gs && gs->is(K::kDict) && scaler.is_null() && gs->get("scale")) {
        scaler = {{"scale", gs->at("scale")->is(K::kTensor) ? gs->at("scale")->tensor.item<double>()
                                                            : gs->at("scale")->as_float(f)},
                  {"growth_tracker", gs->get("growth_tracker") ? int_of(gs->at("growth_tracker"), f) : 0},
                  {"hysteresis_tracker", gs->get("hysteresis_tracker") ? int_of(gs->at("hysteresis_tracker"), f) : 2}};
      }
    }
  for (const auto& p : params) {
    auto it = weights.find(p.canonical);
    MEGATON_CHECK(it != weights.end(), CheckpointError, fc.dir, ": no weights for '", p.canonical, "'");
    out.model[p.canonical] = merge_slices(p, it->second, fc.dir);
    out.dtype = it->second[0].scalar_type();
    if (!have_optim) continue;
    out.optim["master"][p.canonical] = merge_slices(p, master.at(p.canonical), fc.dir);
    out.optim["exp_avg"][p.canonical] = merge_slices(p, m1.at(p.canonical), fc.dir);
    out.optim["exp_avg_sq"][p.canonical] = merge_slices(p, m2.at(p.canonical), fc.dir);
  }
  if (!have_optim) {
    out.optim.clear();
    log.warn("convert: ", fc.what(), " holds no optimizer state (--no-save-optim?): weights only");
    return;
  }
  out.meta.state["optimizer"] = fork::optimizer_state(mm, step < 0 ? out.meta.iteration : step, 0, scaler);
}

}  // namespace megaton::checkpoint
