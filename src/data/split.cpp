#include "data/split.h"

#include <cfenv>
#include <cmath>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/parse.h"

namespace megaton::data {

int64_t round_half_even(double x) {
  const int old = std::fegetround();
  std::fesetround(FE_TONEAREST);
  const auto r = static_cast<int64_t>(std::nearbyint(x));
  std::fesetround(old);
  return r;
}

std::array<double, 3> parse_split(const std::string& split_in) {
  const std::string split = split_in.empty() ? "969, 30, 1" : split_in;
  const char sep = split.find(',') != std::string::npos ? ',' : (split.find('/') != std::string::npos ? '/' : '\0');
  std::vector<double> w;
  std::stringstream ss(split);
  std::string part;
  while (sep ? static_cast<bool>(std::getline(ss, part, sep)) : static_cast<bool>(ss >> part)) {
    std::string digits = part;  // "949, 50" splits into "949" and " 50"; trailing blanks are allowed too
    while (!digits.empty() && std::isspace(static_cast<unsigned char>(digits.back()))) digits.pop_back();
    const auto v = parse_double(digits);
    MEGATON_CHECK(v && *v >= 0 && std::isfinite(*v), UsageError, "--split '", split_in, "': '", part,
                  "' is not a non-negative number; expected e.g. 949,50,1");
    w.push_back(*v);
    if (!sep) break;
  }
  while (w.size() < 3) w.push_back(0.0);
  w.resize(3);
  const double sum = w[0] + w[1] + w[2];
  MEGATON_CHECK(sum > 0, UsageError, "--split '", split_in, "' sums to 0");
  return {w[0] / sum, w[1] / sum, w[2] / sum};
}

std::array<int64_t, 4> split_boundaries(const std::string& split, int64_t size) {
  const auto w = parse_split(split);
  std::array<int64_t, 4> idx{0, 0, 0, 0};
  for (int k = 0; k < 3; ++k) idx[k + 1] = idx[k] + round_half_even(w[k] * double(size));
  const int64_t diff = idx[3] - size;
  for (int k = 1; k < 4; ++k) idx[k] -= diff;
  return idx;
}

}  // namespace megaton::data
