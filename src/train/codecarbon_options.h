// --codecarbon-dir and its companions: where the energy and emissions log goes (train/codecarbon.h) and how energy
// becomes emissions.
#pragma once
#include <string>

namespace megaton::train {

struct CodecarbonOptions {
  std::string dir;                       // --codecarbon-dir: "" = no log
  std::string country_iso_code = "FRA";  // what the fork hard-codes (its runs were on Jean Zay)
  double carbon_intensity = -1;          // g CO2eq per kWh; < 0: 55 for FRA (CodeCarbon's energy-mix data)
  double measure_power_secs = 15;        // how often the counters are read between rows (RAPL counters wrap)
  std::string powercap_root = "/sys/class/powercap";  // where the RAPL counters are read

  /// UsageError naming the flag; resolves carbon_intensity.
  void validate();
};

}  // namespace megaton::train
