// What the CUDA caching allocator holds on a device (Megatron's report_memory: allocated, max allocated, reserved,
// max reserved, in MiB), for the training log and the metrics file.
#pragma once
#include <torch/torch.h>

#include <optional>
#include <string>

namespace megaton {

struct DeviceMemory {
  double allocated_mib = 0, max_allocated_mib = 0, reserved_mib = 0, max_reserved_mib = 0;
};

/// The allocator's counters of a CUDA device since the process started; nothing for the CPU (or a build without CUDA).
std::optional<DeviceMemory> device_memory(const torch::Device& device);

/// The memory a rank on `device` can use at most, in bytes: the GPU's total memory, or the host's physical memory
/// for the CPU. Used to refuse, before allocating, a model whose weights and optimizer state cannot fit.
int64_t device_capacity_bytes(const torch::Device& device);

/// The host memory available to new allocations now (/proc/meminfo's MemAvailable), in bytes; -1 where unknown.
int64_t host_available_bytes();

/// The PCI bus id of a CUDA device ("0000:41:00.0"), by which NVML finds it whatever CUDA_VISIBLE_DEVICES says; ""
/// for the CPU.
std::string device_pci_bus_id(const torch::Device& device);

#ifdef MEGATON_HAVE_CUDA
int64_t cuda_device_capacity_bytes(int device_index);
std::string cuda_device_pci_bus_id(int device_index);
/// The CUDA path (src/core/device_memory_cuda.cpp).
DeviceMemory cuda_device_memory(int device_index);
#endif

}  // namespace megaton
