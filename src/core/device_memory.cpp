#include "core/device_memory.h"

#include <unistd.h>

#include <fstream>

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

int64_t host_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return -1;
}

std::string device_pci_bus_id(const torch::Device& device) {
#ifdef MEGATON_HAVE_CUDA
  if (device.is_cuda()) return cuda_device_pci_bus_id(device.has_index() ? device.index() : 0);
#endif
  (void)device;
  return "";
}

}  // namespace megaton
