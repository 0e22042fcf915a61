// Numbers for people: fixed decimals, and byte counts in GB. printf-family formatting of the standard library
// (std::format comes with GCC 13; Debian 12 builds with GCC 12); durations are format_duration in core/timer.h.
#pragma once
#include <string>

namespace megaton {

/// `v` with `decimals` digits after the point: fixed(0.0173303, 3) == "0.017".
std::string fixed(double v, int decimals);

/// A byte count in GB (10^9) with two decimals, three below 0.01 GB: gigabytes(18.4e9) == "18.40 GB".
std::string gigabytes(double bytes);

}  // namespace megaton
