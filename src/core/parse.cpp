#include "core/parse.h"

#include <stdexcept>

namespace megaton {

std::optional<double> parse_double(const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != text.size()) return std::nullopt;
  return v;
}

}  // namespace megaton
