#include "core/device_memory.h"

#include <unistd.h>

namespace megaton {

std::optional<DeviceMemory> device_memory(const torch::Device& device) {
#ifdef MEGATON_HAVE_CUDA
  if (device.is_cuda()) return cuda_device_memory(device.has_index() ? device.index() : 0);
#endif
  (void)device;
  return std::nullopt;
}

int64_t device_capacity_bytes(const torch::Device& device) {
#ifdef MEGATON_HAVE_CUDA
  if (device.is_cuda()) return cuda_device_capacity_bytes(device.has_index() ? device.index() : 0);
#endif
  (void)device;
  return static_cast<int64_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<int64_t>(::sysconf(_SC_PAGE_SIZE));
}

std::string device_pci_bus_id(const torch::Device& device) {
#ifdef MEGATON_HAVE_CUDA
  if (device.is_cuda()) return cuda_device_pci_bus_id(device.has_index() ? device.index() : 0);
#endif
  (void)device;
  return "";
}

}  // namespace megaton
