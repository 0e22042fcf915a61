#include "checkpoint/fork_common.h"

#include <fstream>

#include "checkpoint/fork_args.h"
#include "checkpoint/torch_file.h"
#include "core/error.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace megaton::checkpoint::fork {

using K = PyNode::Kind;

std::string first_line(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  return s;
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

int64_t int_of(const Py& v, const std::string& where) {
  if (v->is(K::kTensor)) return static_cast<int64_t>(v->tensor.item<double>());
  if (v->is(K::kFloat)) return static_cast<int64_t>(v->f);
  return v->as_int(where);
}

Meta read_meta(const std::string& f) {
  Meta m;
  m.root = load_torch_file(f);
  m.args = fork_args_json(m.root->at("args", f), f);
  m.args.erase("deepspeed_config_dict");
  m.padded_vocab = m.args.value("padded_vocab_size", int64_t{0});
  m.vocab = m.padded_vocab;
  if (Py info = m.root->get("checkpoint_info")) {
    if (Py o = info->get("original_vocab_size")) m.vocab = o->as_int(f + " checkpoint_info");
    if (Py p = info->get("padded_vocab_size")) m.padded_vocab = p->as_int(f + " checkpoint_info");
  }
  MEGATON_CHECK(m.padded_vocab > 0, CheckpointError, f, ": neither args.padded_vocab_size nor checkpoint_info");
  Py it = m.root->get("iteration");
  if (!it) it = m.root->get("global_steps");
  MEGATON_CHECK(it, CheckpointError, f, ": no 'iteration' or 'global_steps'");
  m.meta.iteration = it->as_int(f + " iteration");
  m.meta.model_config = fork_model_config(m.args, m.vocab, f);
  m.meta.args = m.args;
  m.meta.args["converted_from"] = fs::absolute(f).parent_path().string();
  json& st = m.meta.state;
  st["consumed_train_samples"] = m.args.value("consumed_train_samples", int64_t{0});
  st["consumed_valid_samples"] = m.args.value("consumed_valid_samples", int64_t{0});
  const Py tokens = m.root->get("tokens");
  st["consumed_train_tokens"] = tokens ? tokens->as_int(f + " tokens") : m.args.value("consumed_train_tokens", 0);
  if (Py lr = m.root->get("lr_scheduler"); lr && lr->is(K::kDict)) st["lr_scheduler"] = py_to_json(lr);
  return m;
}

torch::Tensor merge_slices(const DsParam& p, const std::vector<torch::Tensor>& slices, const std::string& where) {
  const int tp = static_cast<int>(slices.size());
  if (p.partition_dim < 0) {
    for (const auto& s : slices)
      MEGATON_CHECK(s.numel() == slices[0].numel(), CheckpointError, where, ": '", p.ds_name,
                    "' differs in size across tensor-parallel ranks");
    if (tp == 1) return slices[0].reshape(p.canonical_shape);
    // TP-replicated parameters: the mean of the copies, as DeepSpeed's universal conversion averages them.
    torch::Tensor acc = slices[0].to(torch::kFloat32).clone();
    for (int t = 1; t < tp; ++t) acc += slices[t].to(torch::kFloat32);
    return (acc / tp).to(slices[0].scalar_type()).reshape(p.canonical_shape);
  }
  std::vector<int64_t> local = p.canonical_shape;
  MEGATON_CHECK(local[p.partition_dim] % tp == 0, CheckpointError, where, ": '", p.ds_name, "' cannot be split ", tp,
                " ways");
  local[p.partition_dim] /= tp;
  int64_t n = 1;
  for (auto d : local) n *= d;
  std::vector<torch::Tensor> parts;
  for (int t = 0; t < tp; ++t) {
    MEGATON_CHECK(slices[t].numel() == n, CheckpointError, where, ": '", p.ds_name, "' of TP rank ", t, " has ",
                  slices[t].numel(), " elements, the model needs ", n, " (",
                  p.canonical.rfind("embedding.word", 0) == 0 ? "a different vocabulary padding?" : "another model?",
                  ")");
    parts.push_back(slices[t].reshape(local));
  }
  return torch::cat(parts, p.partition_dim);
}

int64_t skipped_steps(const Meta& mm, const std::string& where) {
  const Py v = mm.root->get("skipped_steps");
  return v ? v->as_int(where + " skipped_steps") : 0;
}

json optimizer_state(const Meta& mm, int64_t step, int64_t skipped, const json& scaler) {
  json opt = {{"optimizer", mm.args.value("optimizer", std::string("adam"))},
              {"step", step},
              {"skipped_steps", skipped},
              {"momentum_initialized", false}};
  if (!scaler.is_null()) opt["grad_scaler"] = scaler;
  return opt;
}

std::string mp_file(const std::string& dir, int m) {
  char b[64];
  std::snprintf(b, sizeof b, "mp_rank_%02d_model_states.pt", m);
  return (fs::path(dir) / b).string();
}

}  // namespace megaton::checkpoint::fork
