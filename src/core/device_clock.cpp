#include "core/device_clock.h"

namespace megaton {

DeviceClock device_clock(const torch::Device& device) {
#ifdef MEGATON_HAVE_CUDA
  if (device.is_cuda()) return cuda_device_clock(device.has_index() ? device.index() : 0);
#endif
  (void)device;
  return {};
}

}  // namespace megaton
