#include "core/format.h"

#include <cstdio>

namespace megaton {

std::string fixed(double v, int decimals) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

std::string gigabytes(double bytes) {
  const double gb = bytes / 1e9;
  return fixed(gb, gb != 0 && gb < 0.01 && gb > -0.01 ? 3 : 2) + " GB";
}

}  // namespace megaton
