#include "checkpoint/sections.h"

#include "checkpoint/format.h"
#include "core/error.h"

namespace megaton::checkpoint {

std::string model_path(const std::string& name) {
  return str(kModelSection, "/", name);
}
std::string optim_path(const std::string& state, const std::string& name) {
  return str(kOptimSection, "/", state, "/", name);
}
std::string rng_path(const std::string& generator) {
  return str(kRngSection, "/", generator);
}

namespace {
void check_name(const std::string& what, const std::string& name) {
  MEGATON_ASSERT(!name.empty() && name.find('/') == std::string::npos, what, " name '", name,
                 "' must be non-empty without '/'");
}

LocalTensor local_of(const parallel::ParamInfo& p, const std::string& path, const torch::Tensor& t, int tp_rank,
                     int tp_size) {
  const ShardPlacement pl =
      place_shard(path, p.global_shape, p.partition_dim, p.global_unpadded_rows, tp_rank, tp_size);
  MEGATON_ASSERT(t.defined(), "tensor '", path, "' is undefined");
  // The shard may be held in a working shape (e.g. QKV as [3*np*hd, h]): any contiguous reshape of the canonical
  // shard. A detached view of the same storage lets the loader fill it in place.
  int64_t numel = 1;
  for (int64_t d : pl.local_shape) numel *= d;
  MEGATON_ASSERT(t.numel() == numel && (t.sizes().vec() == pl.local_shape || t.is_contiguous()), "tensor '", path,
                 "' has local shape ", shape_str(t.sizes().vec()), " but global shape ", shape_str(p.global_shape),
                 " split on dim ", p.partition_dim, " over TP=", tp_size, " gives ", shape_str(pl.local_shape),
                 " (a contiguous reshape of it is accepted)");
  const torch::Tensor v = t.detach().view(pl.local_shape);
  return LocalTensor{path, v, p.global_shape, p.partition_dim, p.global_unpadded_rows};
}
}  // namespace

std::vector<LocalTensor> model_tensors(const parallel::ParamList& model, int tp_rank, int tp_size) {
  std::vector<LocalTensor> out;
  for (const auto& p : model) {
    check_name("parameter", p.name);
    out.push_back(local_of(p, model_path(p.name), p.param, tp_rank, tp_size));
  }
  return out;
}

std::vector<LocalTensor> optim_tensors(const parallel::ParamList& model, const OptimState& optim, int tp_rank,
                                       int tp_size) {
  std::map<std::string, const parallel::ParamInfo*> by_name;
  for (const auto& p : model) by_name[p.name] = &p;
  std::vector<LocalTensor> out;
  for (const auto& [state, tensors] : optim) {
    check_name("optimizer state", state);
    for (const auto& [name, t] : tensors) {
      auto it = by_name.find(name);
      MEGATON_ASSERT(it != by_name.end(), "optimizer state '", state, "' names '", name,
                     "', which is not a parameter of this rank's model");
      out.push_back(local_of(*it->second, optim_path(state, name), t, tp_rank, tp_size));
    }
  }
  return out;
}

}  // namespace megaton::checkpoint
