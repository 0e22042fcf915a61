// device_memory() on CUDA: the caching allocator's statistics (what torch.cuda.memory_allocated / max_memory_allocated
// / memory_reserved / max_memory_reserved report), aggregated over pools (index 0 of each StatArray).
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>

#include <limits>

#include "core/device_memory.h"

namespace megaton {

DeviceMemory cuda_device_memory(int device_index) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device_index);
  const double mib = 1024.0 * 1024.0;
  DeviceMemory m;
  m.allocated_mib = static_cast<double>(stats.allocated_bytes[0].current) / mib;
  m.max_allocated_mib = static_cast<double>(stats.allocated_bytes[0].peak) / mib;
  m.reserved_mib = static_cast<double>(stats.reserved_bytes[0].current) / mib;
  m.max_reserved_mib = static_cast<double>(stats.reserved_bytes[0].peak) / mib;
  return m;
}

int64_t cuda_device_capacity_bytes(int device_index) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device_index) != cudaSuccess) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(prop.totalGlobalMem);
}

std::string cuda_device_pci_bus_id(int device_index) {
  char id[32] = {0};
  if (cudaDeviceGetPCIBusId(id, sizeof(id), device_index) != cudaSuccess) return "";
  return id;
}

}  // namespace megaton
