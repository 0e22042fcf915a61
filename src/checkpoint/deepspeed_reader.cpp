#include <filesystem>
#include <fstream>
#include <regex>

#include "checkpoint/deepspeed_layout.h"
#include "checkpoint/fork_args.h"
#include "checkpoint/fork_checkpoint.h"
#include "checkpoint/fork_common.h"
#include "checkpoint/format.h"
#include "checkpoint/torch_file.h"
#include "core/error.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace megaton::checkpoint {

namespace {

using K = PyNode::Kind;
using fork::int_of;
using fork::merge_slices;
using fork::mp_file;

std::string layer_file(const std::string& dir, int layer, int t) {
  char b[64];
  std::snprintf(b, sizeof b, "layer_%02d-model_%02d-model_states.pt", layer, t);
  return (fs::path(dir) / b).string();
}

/// Files of a step folder: count of layer_01 files (TP), mp_rank files, [bf16_]zero files.
struct Listing {
  int tp = 0, mp = 0, dp = 0;
  bool bf16 = false;
};

Listing list_files(const std::string& dir) {
  Listing l;
  const std::regex layer01(R"(layer_01-model_\d+-model_states\.pt)"), mp(R"(mp_rank_\d+_model_states\.pt)"),
      zero(R"((bf16_)?zero_pp_rank_\d+_mp_rank_\d+_optim_states\.pt)");
  int zeros = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    std::smatch m;
    if (std::regex_match(n, layer01)) ++l.tp;
    if (std::regex_match(n, mp)) ++l.mp;
    if (std::regex_match(n, m, zero)) {
      ++zeros;
      l.bf16 = m[1].matched;
    }
  }
  MEGATON_CHECK(l.tp > 0, CheckpointError, dir, ": no layer_01-model_XX-model_states.pt (the embedding's weights)");
  MEGATON_CHECK(l.mp % l.tp == 0, CheckpointError, dir, ": ", l.mp, " mp_rank files for ", l.tp,
                " tensor-parallel ranks");
  l.dp = zeros / l.mp;
  MEGATON_CHECK(zeros == 0 || zeros == l.dp * l.mp, CheckpointError, dir, ": ", zeros,
                " ZeRO optimizer files do not make whole data-parallel groups of ", l.mp, " model-parallel ranks");
  return l;
}

Py state_of_group(const Py& base, size_t g, const std::string& where) {
  if (base->is(K::kList)) {
    MEGATON_CHECK(g < base->items.size(), CheckpointError, where, ": no optimizer state for group ", g);
    return base->items[g];
  }
  const Py st = base->at("state", where);
  for (const auto& [k, v] : st->dict)
    if (k->is(K::kInt) && k->i == static_cast<int64_t>(g)) return v;
  throw CheckpointError(str(where, ": no optimizer state for group ", g));
}

}  // namespace

void fork::read_deepspeed(const ForeignCheckpoint& fc, const fork::Meta& mm, ForeignState& out, const Logger& log) {
  const std::string& dir = fc.dir;
  const Listing l = list_files(dir);
  const int tp = l.tp, pp = l.mp / l.tp;
  out.layout = SavedLayout{tp, pp, std::max(l.dp, 1), tp * pp * std::max(l.dp, 1)};
  const auto params = deepspeed_params(out.meta.model_config, out.padded_vocab);
  log.info("convert: ", fc.what(), ": TP=", tp, " PP=", pp, " DP=", l.dp, ", ", params.size(), " parameters, ",
           l.dp > 0 ? (l.bf16 ? "BF16 optimizer" : "ZeRO optimizer") : "no optimizer state");

  // ~~~ weights: the layer files ~~~
  // The parameters come layer by layer: one layer's files (one per TP rank) are held at a time.
  std::map<std::string, Py> files;
  int files_layer = -1;
  auto file = [&](const std::string& f) -> const Py& {
    auto it = files.find(f);
    if (it == files.end()) it = files.emplace(f, load_torch_file(f)).first;
    return it->second;
  };
  for (const auto& p : params) {
    if (p.layer != files_layer) {
      files.clear();
      files_layer = p.layer;
    }
    std::vector<torch::Tensor> slices;
    for (int t = 0; t < tp; ++t) {
      const std::string f = layer_file(dir, p.layer, t);
      slices.push_back(file(f)->at(p.local_name, f)->as_tensor(f + " '" + p.local_name + "'"));
    }
    out.model[p.canonical] = merge_slices(p, slices, layer_file(dir, p.layer, 0));
    out.dtype = slices[0].scalar_type();
  }
  files.clear();
  if (l.dp == 0) return;

  // ~~~ optimizer: each model-parallel rank's flat groups, its data-parallel partitions concatenated ~~~
  std::map<std::string, std::map<std::string, std::vector<torch::Tensor>>> frags;  // state -> ds name -> per TP
  int64_t step = -1;
  json scaler;
  for (int m = 0; m < l.mp; ++m) {
    const int t = m % tp;
    const std::string mf = mp_file(dir, m);
    const Py mroot = m == 0 ? mm.root : load_torch_file(mf);
    const Py shapes = mroot->at("param_shapes", mf);
    const auto& groups = shapes->as_seq(mf + " param_shapes");
    std::vector<std::map<std::string, std::vector<torch::Tensor>>> flat(groups.size());  // group -> state -> dp parts
    for (int d = 0; d < l.dp; ++d) {
      char b[96];
      std::snprintf(b, sizeof b, "%szero_pp_rank_%d_mp_rank_%02d_optim_states.pt", l.bf16 ? "bf16_" : "", d, m);
      const std::string zf = (fs::path(dir) / b).string();
      const Py z = load_torch_file(zf);
      const Py osd = z->at("optimizer_state_dict", zf);
      const auto& fp32 = osd->at("single_partition_of_fp32_groups", zf)->as_seq(zf);
      const Py base = osd->at("base_optimizer_state", zf);
      MEGATON_CHECK(fp32.size() == groups.size(), CheckpointError, zf, ": ", fp32.size(), " fp32 groups but ", mf,
                    " lists ", groups.size());
      for (size_t g = 0; g < groups.size(); ++g) {
        flat[g]["master"].push_back(fp32[g]->as_tensor(zf + " fp32 group"));
        const Py gs = state_of_group(base, g, zf);
        flat[g]["exp_avg"].push_back(gs->at("exp_avg", zf)->as_tensor(zf + " exp_avg"));
        flat[g]["exp_avg_sq"].push_back(gs->at("exp_avg_sq", zf)->as_tensor(zf + " exp_avg_sq"));
        if (Py s = gs->get("step")) {
          const int64_t v = int_of(s, zf + " step");
          MEGATON_CHECK(step < 0 || step == v, CheckpointError, zf, ": Adam step ", v, " differs from another rank's ",
                        step);
          step = v;
        }
      }
      if (Py ls = osd->get("loss_scaler"); ls && ls->is(K::kRecord) && scaler.is_null()) {
        auto num = [&](const char* k, double dflt) {
          Py v = ls->get(k);
          return v ? v->as_float(zf + " loss_scaler") : dflt;
        };
        const double cur_iter = num("cur_iter", 0), last = num("last_overflow_iter", -1),
                     window = num("scale_window", 1000);
        scaler = {{"scale", num("cur_scale", 1.0)},
                  {"growth_tracker", static_cast<int>(std::fmod(cur_iter - last - 1, std::max(window, 1.0)))},
                  {"hysteresis_tracker", static_cast<int>(num("cur_hysteresis", 2))}};
      }
    }
    for (size_t g = 0; g < groups.size(); ++g) {
      std::map<std::string, torch::Tensor> whole;
      for (auto& [state, parts] : flat[g]) whole[state] = torch::cat(parts).to(torch::kFloat32);
      int64_t off = 0;
      for (const auto& [k, v] : groups[g]->dict) {
        const std::string& name = k->as_str(mf + " param_shapes");
        std::vector<int64_t> shape;
        int64_t n = 1;
        for (const auto& x : v->as_seq(mf + " '" + name + "' shape")) {
          shape.push_back(x->as_int(mf));
          n *= shape.back();
        }
        for (auto& [state, w] : whole) {
          MEGATON_CHECK(off + n <= w.numel(), CheckpointError, dir, ": the ", state,
                        " partitions of model-parallel rank ", m, " group ", g, " hold ", w.numel(), " values; '", name,
                        "' needs ", off + n);
          auto& slot = frags[state][name];
          if (slot.size() < static_cast<size_t>(tp)) slot.resize(tp);
          if (!slot[t].defined()) slot[t] = w.narrow(0, off, n).reshape(shape);  // tied copies: the first stage's
        }
        off += n;
      }
    }
  }
  for (const auto& [state, by_name] : frags)
    for (const auto& p : params) {
      auto it = by_name.find(p.ds_name);
      MEGATON_CHECK(it != by_name.end(), CheckpointError, dir, ": no ", state, " state for '", p.ds_name,
                    "' in the mp_rank files' param_shapes");
      for (int t = 0; t < tp; ++t)
        MEGATON_CHECK(it->second.size() == static_cast<size_t>(tp) && it->second[t].defined(), CheckpointError, dir,
                      ": '", p.ds_name, "' has no ", state, " state on tensor-parallel rank ", t);
      out.optim[state][p.canonical] = merge_slices(p, it->second, dir).to(torch::kFloat32);
    }
  out.meta.state["optimizer"] =
      fork::optimizer_state(mm, step < 0 ? out.meta.iteration : step, fork::skipped_steps(mm, dir), scaler);
}

void fork::read_universal(const ForeignCheckpoint& fc, const fork::Meta& mm, ForeignState& out, const Logger& log) {
  const fs::path zero = fs::path(fc.dir) / "zero";
  const int tp = mm.args.value("tensor_model_parallel_size", 1), pp = mm.args.value("pipeline_model_parallel_size", 1);
  const int dp = std::max<int>(1, mm.args.value("data_parallel_size", 1));
  out.layout = SavedLayout{tp, pp, dp, tp * pp * dp};
  const auto params = deepspeed_params(out.meta.model_config, out.padded_vocab);
  log.info("convert: ", fc.what(), ": ", params.size(), " parameters (saved at TP=", tp, " PP=", pp, ")");
  out.dtype = fork_params_dtype(mm.args);
  int64_t step = -1;
  for (const auto& p : params) {
    const fs::path folder = zero / p.ds_name;
    for (const char* state : {"fp32", "exp_avg", "exp_avg_sq"}) {
      const std::string f = (folder / (std::string(state) + ".pt")).string();
      const Py d = load_torch_file(f);
      torch::Tensor t = d->at("param", f)->as_tensor(f + " 'param'").to(torch::kFloat32);
      if (Py vt = d->get("vocab_tensor"); vt && vt->as_int(f) != 0 && t.size(0) < out.padded_vocab)
        t = torch::cat({t, torch::zeros({out.padded_vocab - t.size(0), t.size(1)})});  // padding-free: re-pad
      const Py nsub = d->get("param_n_sub_params");
      if (p.n_sub_params == 2 && !(nsub && nsub->as_int(f) == 2)) {
        // GLU halves concatenated per TP rank of the saving run: [tp, 2, f/tp, ...] -> [2, f, ...].
        auto parts = t.chunk(tp, 0);
        std::vector<torch::Tensor> slices(parts.begin(), parts.end());
        t = merge_slices(p, slices, f);
      }
      int64_t n = 1;
      for (auto x : p.canonical_shape) n *= x;
      MEGATON_CHECK(t.numel() == n, CheckpointError, f, ": 'param' has ", t.numel(), " elements, '", p.canonical,
                    "' needs ", n, " (another model or vocabulary padding?)");
      t = t.reshape(p.canonical_shape).contiguous();
      out.optim[std::string(state) == "fp32" ? "master" : state][p.canonical] = t;
    }
    const fs::path sf = folder / "step.pt";
    if (step < 0 && fs::exists(sf)) step = int_of(load_torch_file(sf.string()), sf.string());
    out.model[p.canonical] = out.optim["master"][p.canonical].to(out.dtype);
  }
  const int64_t skipped = fork::skipped_steps(mm, fc.dir);
  if (step < 0)
    step = (mm.root->get("global_steps") ? mm.root->at("global_steps")->as_int(fc.dir) : out.meta.iteration) - skipped;
  out.meta.state["optimizer"] = fork::optimizer_state(mm, step, skipped, nullptr);
}

}  // namespace megaton::checkpoint
