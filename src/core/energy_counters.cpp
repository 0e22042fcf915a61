#include "core/energy_counters.h"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace megaton {
namespace {

namespace fs = std::filesystem;

bool read_u64(const std::string& path, uint64_t& out) {
  std::ifstream f(path);
  unsigned long long v = 0;
  if (!(f >> v)) return false;
  out = v;
  return true;
}

std::string read_line(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

}  // namespace

RaplEnergy::RaplEnergy(const std::string& powercap_root) {
  std::error_code ec;
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(powercap_root, ec)) {
    const std::string n = e.path().filename().string();
    // Top-level domains only (intel-rapl:0, not the sub-domains intel-rapl:0:0, which they contain).
    if (n.rfind("intel-rapl:", 0) == 0 && n.find(':', 11) == std::string::npos) dirs.push_back(e.path());
  }
  if (ec || dirs.empty()) {
    why_ = "no RAPL domains under " + powercap_root;
    return;
  }
  std::sort(dirs.begin(), dirs.end());
  for (const auto& d : dirs) {
    Domain dom;
    dom.name = read_line((d / "name").string());
    dom.energy_path = (d / "energy_uj").string();
    if (!read_u64(dom.energy_path, dom.last)) {
      why_ = dom.energy_path + " is not readable (RAPL counters are readable by root only on most systems)";
      domains_.clear();
      return;
    }
    if (!read_u64((d / "max_energy_range_uj").string(), dom.max_range) || dom.max_range == 0)
      dom.max_range = uint64_t{1} << 32;
    domains_.push_back(dom);
  }
}

std::vector<std::string> RaplEnergy::domain_names() const {
  std::vector<std::string> names;
  for (const auto& d : domains_) names.push_back(d.name);
  return names;
}

double RaplEnergy::sample() {
  double total = 0;
  for (auto& d : domains_) {
    uint64_t now = 0;
    if (read_u64(d.energy_path, now)) {
      const uint64_t delta = now >= d.last ? now - d.last : d.max_range - d.last + now;  // one wrap at most
      d.joules += static_cast<double>(delta) * 1e-6;
      d.last = now;
    }
    total += d.joules;
  }
  return total;
}

// The NVML entry points used, resolved from libnvidia-ml.so.1 (nvml.h's signatures; nvmlReturn_t is an int, 0 is
// NVML_SUCCESS, nvmlDevice_t a pointer).
struct NvmlEnergy::Api {
  void* lib = nullptr;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*by_pci_bus_id)(const char*, void**) = nullptr;
  int (*total_energy)(void*, unsigned long long*) = nullptr;
  int (*name)(void*, char*, unsigned int) = nullptr;
  ~Api() {
    if (shutdown) shutdown();
    if (lib) dlclose(lib);
  }
};

std::unique_ptr<NvmlEnergy> NvmlEnergy::open(const std::string& pci_bus_id, std::string& why) {
  auto api = std::make_unique<Api>();
  api->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!api->lib) {
    why = "libnvidia-ml.so.1 not found (no NVIDIA driver)";
    return nullptr;
  }
  auto sym = [&](const char* n) { return dlsym(api->lib, n); };
  api->init = reinterpret_cast<int (*)()>(sym("nvmlInit_v2"));
  api->by_pci_bus_id = reinterpret_cast<int (*)(const char*, void**)>(sym("nvmlDeviceGetHandleByPciBusId_v2"));
  api->total_energy = reinterpret_cast<int (*)(void*, unsigned long long*)>(sym("nvmlDeviceGetTotalEnergyConsumption"));
  api->name = reinterpret_cast<int (*)(void*, char*, unsigned int)>(sym("nvmlDeviceGetName"));
  if (!api->init || !api->by_pci_bus_id || !api->total_energy || !api->name) {
    why = "libnvidia-ml.so.1 lacks the energy functions (driver too old)";
    return nullptr;
  }
  if (api->init() != 0) {
    why = "nvmlInit failed";
    return nullptr;
  }
  api->shutdown = reinterpret_cast<int (*)()>(sym("nvmlShutdown"));
  std::unique_ptr<NvmlEnergy> e(new NvmlEnergy());
  if (api->by_pci_bus_id(pci_bus_id.c_str(), &e->device_) != 0) {
    why = "NVML has no device at PCI bus id " + pci_bus_id;
    return nullptr;
  }
  unsigned long long mj = 0;
  if (api->total_energy(e->device_, &mj) != 0) {
    why = "the GPU at " + pci_bus_id + " has no energy counter (NVML supports it from Volta on)";
    return nullptr;
  }
  e->start_mj_ = mj;
  char name[96] = {0};
  if (api->name(e->device_, name, sizeof(name)) == 0) e->name_ = name;
  e->api_ = std::move(api);
  return e;
}

NvmlEnergy::~NvmlEnergy() = default;

double NvmlEnergy::sample() {
  unsigned long long mj = 0;
  if (api_->total_energy(device_, &mj) == 0 && mj >= start_mj_)
    last_joules_ = static_cast<double>(mj - start_mj_) * 1e-3;
  return last_joules_;  // a failed read keeps the last value
}

}  // namespace megaton
