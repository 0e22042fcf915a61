// Helpers of the model's multi-rank tests: gather a TP-sharded tensor into its global canonical shape, and compare
// a sharded model's parameters or gradients with those of a single-rank reference model.
#pragma once
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "dist/communicator.h"
#include "model/model_test_util.h"
#include "parallel/param_info.h"

namespace megaton::modeltest {

/// `local` (shaped like p.param) gathered over the TP group into p.global_shape.
inline torch::Tensor gather_canonical(const parallel::ParamInfo& p, const torch::Tensor& local,
                                      dist::Communicator& tp) {
  if (p.partition_dim < 0) return local.reshape(p.global_shape);
  std::vector<int64_t> shard = p.global_shape;
  shard[p.partition_dim] /= tp.size();
  torch::Tensor s = local.contiguous().view(shard);
  std::vector<int64_t> stacked{tp.size()};
  stacked.insert(stacked.end(), shard.begin(), shard.end());
  torch::Tensor out = torch::empty(stacked, s.options());
  tp.all_gather(out, s);
  return torch::cat(out.unbind(0), p.partition_dim);
}

/// Largest rel_err between every local parameter (or its grad) gathered over TP and the reference's of that name.
/// Every rank calls it (it gathers); `missing` counts names the reference lacks.
inline double worst_param_error(const parallel::ParamList& mine, const parallel::ParamList& ref, dist::Communicator& tp,
                                bool grads, std::string* worst_name, int* missing) {
  auto refs = by_name(ref);
  double worst = 0;
  for (const auto& p : mine) {
    torch::Tensor local = grads ? p.param.grad() : p.param.detach();
    if (!local.defined()) local = torch::zeros_like(p.param);
    torch::Tensor full = gather_canonical(p, local, tp);
    auto it = refs.find(p.name);
    if (it == refs.end()) {
      ++*missing;
      continue;
    }
    torch::Tensor r = grads ? it->second.param.grad() : it->second.param.detach();
    const double e = rel_err(full, r.reshape(p.global_shape));
    if (e > worst) worst = e, *worst_name = p.name;
  }
  return worst;
}

}  // namespace megaton::modeltest
