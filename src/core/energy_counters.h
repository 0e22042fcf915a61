// Cumulative energy counters of the hardware a rank runs on (what the CodeCarbon log of train/codecarbon.h reads):
//   RaplEnergy  the CPU packages' counters of the powercap interface (ROOT/intel-rapl:N/energy_uj, the top-level
//               domains), in joules since construction; each counter wraps at its max_energy_range_uj (minutes at full
//               power), so sample() must be called more often than that.
//   NvmlEnergy  a GPU's energy since its driver loaded (nvmlDeviceGetTotalEnergyConsumption, millijoules, Volta and
//               newer), through libnvidia-ml.so.1 opened at run time: a CPU build runs where no NVIDIA driver exists.
// Neither is an error when unreadable (RAPL is root-only on most kernels; containers hide it): available() is false
// and why() says why, for the log.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace megaton {

class RaplEnergy {
 public:
  explicit RaplEnergy(const std::string& powercap_root = "/sys/class/powercap");
  bool available() const { return !domains_.empty(); }
  const std::string& why() const { return why_; }
  /// The package domains read (e.g. "package-0").
  std::vector<std::string> domain_names() const;
  /// Reads every counter and returns the joules counted since construction.
  double sample();

 private:
  struct Domain {
    std::string name, energy_path;
    uint64_t max_range = 0, last = 0;
    double joules = 0;
  };
  std::vector<Domain> domains_;
  std::string why_;
};

class NvmlEnergy {
 public:
  /// The GPU with this PCI bus id ("0000:41:00.0", as cudaDeviceGetPCIBusId gives it); null when the library, the
  /// device or its energy counter is not there (`why` says which).
  static std::unique_ptr<NvmlEnergy> open(const std::string& pci_bus_id, std::string& why);
  ~NvmlEnergy();
  NvmlEnergy(const NvmlEnergy&) = delete;
  NvmlEnergy& operator=(const NvmlEnergy&) = delete;
  /// Joules since open().
  double sample();
  const std::string& name() const { return name_; }

  struct Api;

 private:
  NvmlEnergy() = default;
  std::unique_ptr<Api> api_;
  void* device_ = nullptr;
  uint64_t start_mj_ = 0;
  double last_joules_ = 0;
  std::string name_;
};

}  // namespace megaton
