#include "infer/broadcast_text.h"

#include <cstring>

namespace megaton::infer {

int64_t broadcast_int(dist::Communicator& world, int64_t v, torch::Device device) {
  torch::Tensor n = torch::tensor({v}, torch::kInt64).to(device);
  world.broadcast(n, 0);
  return n.cpu().item<int64_t>();
}

std::string broadcast_string(dist::Communicator& world, const std::string& s, torch::Device device) {
  const int64_t n = broadcast_int(world, static_cast<int64_t>(s.size()), device);
  torch::Tensor bytes = torch::zeros({n}, torch::kUInt8);
  if (world.rank() == 0 && n > 0) std::memcpy(bytes.data_ptr(), s.data(), s.size());
  if (n > 0) {
    bytes = bytes.to(device);
    world.broadcast(bytes, 0);
    bytes = bytes.cpu();
  }
  return std::string(static_cast<const char*>(bytes.data_ptr()), n);
}

}  // namespace megaton::infer
