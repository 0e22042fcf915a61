// A synthetic model for checkpoint tests: the parameter list a GPT of 4 layers would produce at any TP x PP layout
// (GPT-2's parameter set: fused QKV [heads, 3, hd, h] split on dim 0, row-parallel weights split on dim 1, a
// vocab-padded word embedding tied between first and last stage, replicated LayerNorms and row-parallel biases), with
// every value a pure function of (name, global index), so any rank can compute the full global tensor a shard must
// equal.
#pragma once
#include <mpi.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/collective.h"
#include "core/remove_tree.h"
#include "dist/process_groups.h"
#include "parallel/param_info.h"

namespace megaton::ckpttest {

constexpr int kLayers = 4, kHidden = 8, kHeads = 4, kFfn = 16, kVocab = 50, kPositions = 16;

/// Vocabulary padded to a multiple of 4*TP (Megatron pads to make_vocab_size_divisible_by * TP).
inline int64_t padded_vocab(int tp) {
  return (kVocab + 4 * tp - 1) / (4 * tp) * (4 * tp);
}

struct GlobalParam {
  std::string name;
  std::vector<int64_t> shape;  // padded
  int partition_dim;
  int64_t unpadded_rows;
  std::vector<int> stages;  // pipeline stages holding it
};

inline std::vector<GlobalParam> global_params(int tp, int pp) {
  std::vector<GlobalParam> g;
  const int per = kLayers / pp;
  std::vector<int> emb_stages = {0};
  if (pp > 1) emb_stages.push_back(pp - 1);
  g.push_back({"embedding.word_embeddings.weight", {padded_vocab(tp), kHidden}, 0, kVocab, emb_stages});
  g.push_back({"embedding.position_embeddings.weight", {kPositions, kHidden}, -1, 0, {0}});
  const int hd = kHidden / kHeads;
  for (int l = 0; l < kLayers; ++l) {
    const int s = l / per;
    const std::string p = "layers." + std::to_string(l) + ".";
    g.push_back({p + "input_layernorm.weight", {kHidden}, -1, 0, {s}});
    g.push_back({p + "input_layernorm.bias", {kHidden}, -1, 0, {s}});
    g.push_back({p + "attention.qkv.weight", {kHeads, 3, hd, kHidden}, 0, 0, {s}});
    g.push_back({p + "attention.qkv.bias", {kHeads, 3, hd}, 0, 0, {s}});
    g.push_back({p + "attention.dense.weight", {kHidden, kHidden}, 1, 0, {s}});
    g.push_back({p + "attention.dense.bias", {kHidden}, -1, 0, {s}});
    g.push_back({p + "post_attention_layernorm.weight", {kHidden}, -1, 0, {s}});
    g.push_back({p + "post_attention_layernorm.bias", {kHidden}, -1, 0, {s}});
    g.push_back({p + "mlp.fc1.weight", {kFfn, kHidden}, 0, 0, {s}});
    g.push_back({p + "mlp.fc1.bias", {kFfn}, 0, 0, {s}});
    g.push_back({p + "mlp.fc2.weight", {kHidden, kFfn}, 1, 0, {s}});
    g.push_back({p + "mlp.fc2.bias", {kHidden}, -1, 0, {s}});
  }
  g.push_back({"final_layernorm.weight", {kHidden}, -1, 0, {pp - 1}});
  g.push_back({"final_layernorm.bias", {kHidden}, -1, 0, {pp - 1}});
  return g;
}

/// The full tensor of `name` for `section` ("model", or an optimizer state), fp32, at its padded global shape.
/// Row r's values do not depend on the padded size, so models padded differently agree on the real rows.
inline torch::Tensor global_value(const std::string& name, const std::vector<int64_t>& shape,
                                  const std::string& section) {
  int64_t h = 0;
  for (char c : name + "/" + section) h = (h * 131 + c) % 1000003;
  int64_t n = 1;
  for (auto s : shape) n *= s;
  auto t = torch::arange(n, torch::kFloat32).remainder(251).mul(0.0078125) + static_cast<float>(h % 97) * 0.25f;
  return t.reshape(shape);
}

/// The shard of `full` at TP rank `r` of `tp` along `dim` (whole tensor for dim -1).
inline torch::Tensor shard_of(const torch::Tensor& full, int dim, int r, int tp) {
  if (dim < 0) return full.clone();
  return full.chunk(tp, dim)[r].clone();
}

/// This rank's ParamList (values in `dtype`, or zeros when `zero`).
inline parallel::ParamList local_params(const dist::ProcessGroups& g, torch::ScalarType dtype, bool zero) {
  parallel::ParamList out;
  const int tp = g.grid.tp_size();
  for (const auto& gp : global_params(tp, g.grid.pp_size())) {
    bool here = false;
    for (int s : gp.stages) here |= s == g.coords.pp;
    if (!here) continue;
    parallel::ParamInfo p;
    p.name = gp.name;
    p.global_shape = gp.shape;
    p.partition_dim = gp.partition_dim;
    p.global_unpadded_rows = gp.unpadded_rows;
    p.tied_embedding = gp.stages.size() > 1;
    torch::Tensor v = shard_of(global_value(gp.name, gp.shape, "model"), gp.partition_dim, g.coords.tp, tp).to(dtype);
    // Like the model's ParamFactory, hold QKV in its working shape [3*np*hd, h] / [3*np*hd].
    if (gp.name.find("attention.qkv.weight") != std::string::npos) v = v.reshape({-1, kHidden});
    if (gp.name.find("attention.qkv.bias") != std::string::npos) v = v.reshape({-1});
    p.param = (zero ? torch::zeros_like(v) : v).requires_grad_(true);
    out.push_back(p);
  }
  return out;
}

inline const std::vector<std::string>& optim_states() {
  static const std::vector<std::string> s = {"master", "exp_avg", "exp_avg_sq"};
  return s;
}

inline checkpoint::OptimState local_optim(const parallel::ParamList& params, int tp_rank, int tp, bool zero) {
  checkpoint::OptimState o;
  for (const auto& s : optim_states())
    for (const auto& p : params) {
      torch::Tensor v = shard_of(global_value(p.name, p.global_shape, s), p.partition_dim, tp_rank, tp);
      o[s][p.name] = (zero ? torch::zeros_like(v) : v).reshape(p.param.sizes());
    }
  return o;
}

/// Random-generator bytes distinct per global rank.
inline checkpoint::RngState local_rng(int rank) {
  return {{"cpu", (torch::arange(40, torch::kInt64) * 7 + rank * 13).remainder(256).to(torch::kUInt8)},
          {"cuda", (torch::arange(24, torch::kInt64) + rank).to(torch::kUInt8)}};
}

/// A fresh directory shared by all ranks (rank 0 creates it under $TMPDIR).
inline std::string shared_tmpdir(const std::string& tag) {
  std::string dir;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    const char* base = std::getenv("TMPDIR");
    std::string templ = std::string(base ? base : "/tmp") + "/megaton_ckpt_" + tag + "_XXXXXX";
    dir = mkdtemp(templ.data());
  }
  int len = static_cast<int>(dir.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
  dir.resize(len);
  MPI_Bcast(dir.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
  return dir;
}

inline void remove_shared(const std::string& dir) {
  checkpoint::sleepy_barrier();
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) megaton::remove_tree(dir);
  checkpoint::sleepy_barrier();
}

}  // namespace megaton::ckpttest
