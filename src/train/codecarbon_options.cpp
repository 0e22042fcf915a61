#include "train/codecarbon_options.h"

#include "core/error.h"

namespace megaton::train {

void CodecarbonOptions::validate() {
  if (carbon_intensity < 0) {
    MEGATON_CHECK(country_iso_code == "FRA", UsageError, "--codecarbon-country-iso-code ", country_iso_code,
                  " needs --codecarbon-carbon-intensity (g CO2eq per kWh of that grid); megaton carries the value of "
                  "FRA only (55, CodeCarbon's energy-mix figure), the country Megatron-DeepSpeed hard-codes");
    carbon_intensity = 55.0;
  }
  MEGATON_CHECK(country_iso_code.size() == 3, UsageError,
                "--codecarbon-country-iso-code: expected a 3-letter ISO code (FRA, USA, ...), got '", country_iso_code,
                "'");
  MEGATON_CHECK(measure_power_secs > 0, UsageError, "--codecarbon-measure-power-secs must be > 0, got ",
                measure_power_secs);
}

}  // namespace megaton::train
