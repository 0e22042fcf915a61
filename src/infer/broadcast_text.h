// Rank 0's commands to the other ranks of an inference job (prompts, server batches): an integer or a string sent
// from world rank 0 to every rank, through the world communicator's device.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "dist/communicator.h"

namespace megaton::infer {

/// Collective over `world`; every rank returns rank 0's `v`.
int64_t broadcast_int(dist::Communicator& world, int64_t v, torch::Device device);

/// Collective over `world`; every rank returns rank 0's `s` (other ranks' arguments are ignored).
std::string broadcast_string(dist::Communicator& world, const std::string& s, torch::Device device);

}  // namespace megaton::infer
