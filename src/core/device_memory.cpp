#include "core/device_memory.h"

namespace megaton {

std::optional<DeviceMemory> device_memory(const torch::Device& device) {
#ifdef MEGATON_HAVE_CUDA
  if (device.is_cuda()) return cuda_device_memory(device.has_index() ? device.index() : 0);
#endif
  (void)device;
  return std::nullopt;
}

}  // namespace megaton
