// Dataset paths of the file's sections and the local shards that go in them: model/<name> for the weights,
// optim/<state>/<name> for the optimizer's per-parameter state (fp32 master, Adam moments), rng/<generator>.
#pragma once
#include <string>
#include <vector>

#include "checkpoint/catalog.h"
#include "checkpoint/checkpoint.h"

namespace megaton::checkpoint {

std::string model_path(const std::string& name);
std::string optim_path(const std::string& state, const std::string& name);
std::string rng_path(const std::string& generator);

/// One LocalTensor per parameter; checks each shard's shape against its placement at this TP rank.
std::vector<LocalTensor> model_tensors(const parallel::ParamList& model, int tp_rank, int tp_size);
/// One LocalTensor per (state, parameter) of `optim`; every name must be a parameter of `model` with its shape.
std::vector<LocalTensor> optim_tensors(const parallel::ParamList& model, const OptimState& optim, int tp_rank,
                                       int tp_size);

}  // namespace megaton::checkpoint
