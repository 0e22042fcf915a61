#include "parallel/param_factory.h"

#include "core/error.h"

namespace megaton::parallel {

torch::Tensor ParamFactory::make(const ParamRequest& r) {
  for (const auto& p : params_) MEGATON_ASSERT(p.name != r.name, "parameter ", r.name, " created twice");
  InitSpec init = r.init;
  if (r.global_unpadded_rows > 0) init.valid_rows = r.global_unpadded_rows;
  torch::Tensor shard = init_shard(r.name, r.global_shape, r.partition_dim, tp_rank_, tp_size_, init, seed_);
  if (!r.local_shape.empty()) shard = shard.reshape(r.local_shape);
  torch::Tensor param = shard.to(device_, dtype_).contiguous().detach().requires_grad_(true);
  ParamInfo info;
  info.name = r.name;
  info.param = param;
  info.global_shape = r.global_shape;
  info.partition_dim = r.partition_dim;
  info.global_unpadded_rows = r.global_unpadded_rows;
  info.no_weight_decay = r.no_weight_decay;
  info.tied_embedding = r.tied_embedding;
  info.fp32_optimizer_state = r.fp32_optimizer_state;
  info.lr_scale = r.lr_scale;
  params_.push_back(std::move(info));
  return param;
}

}  // namespace megaton::parallel
