#include "optim/dynamic_map.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace megaton::optim {

std::array<float, 256> dynamic_map(bool is_signed) {
  // Exponent i (0..6) contributes the midpoints of 2^i (signed, both signs) or 2^(i+1) (unsigned) equal steps over
  // [0.1, 1], times 10^(i-6); then 0 and 1. Computed in double and rounded once.
  constexpr int kExponentBits = 7;
  std::vector<float> data;
  for (int i = 0; i < kExponentBits; ++i) {
    const int items = is_signed ? 1 << i : 1 << (i + 1);
    const double step = 0.9 / items, scale = std::pow(10.0, -(kExponentBits - 1) + i);
    for (int k = 0; k < items; ++k) {
      const double mean = 0.1 + step * (k + 0.5);
      data.push_back(static_cast<float>(scale * mean));
      if (is_signed) data.push_back(static_cast<float>(-scale * mean));
    }
  }
  data.push_back(0.0f);
  data.push_back(1.0f);
  std::sort(data.begin(), data.end());
  MEGATON_ASSERT(data.size() == 256, "dynamic map of ", data.size(), " entries");
  std::array<float, 256> out{};
  std::copy(data.begin(), data.end(), out.begin());
  return out;
}

torch::Tensor dynamic_map_tensor(bool is_signed, torch::Device device) {
  const std::array<float, 256> m = dynamic_map(is_signed);
  return torch::from_blob(const_cast<float*>(m.data()), {256}, torch::kFloat32).clone().to(device);
}

torch::Tensor quantize_codes(const torch::Tensor& map, const torch::Tensor& x, bool is_signed) {
  // quantize_2D: a binary search from entry 127 in steps of 64, 32, ..., 1 that remembers the nearest entries seen
  // below (lower) and above (upper) x, then picks between the last entry and the remembered neighbour on x's side
  // by their midpoint.
  auto full = [&](double v, torch::ScalarType t) { return torch::full_like(x, v, x.options().dtype(t)); };
  torch::Tensor pivot = full(127, torch::kInt64);
  torch::Tensor lower_pivot = full(0, torch::kInt64), upper_pivot = full(255, torch::kInt64);
  torch::Tensor lower = full(is_signed ? -1.0 : 0.0, torch::kFloat32), upper = full(1.0, torch::kFloat32);
  torch::Tensor val = map.index_select(0, pivot.reshape({-1})).view_as(x);
  for (int step = 64; step > 0; step >>= 1) {
    const torch::Tensor up = x > val;  // NaN: never up
    lower_pivot = torch::where(up, pivot, lower_pivot);
    lower = torch::where(up, val, lower);
    upper_pivot = torch::where(up, upper_pivot, pivot);
    upper = torch::where(up, upper, val);
    pivot = pivot + torch::where(up, step, -step);
    val = map.index_select(0, pivot.reshape({-1})).view_as(x);
  }
  const torch::Tensor up = x > val;
  const torch::Tensor take_upper = x > (upper + val) * 0.5f;
  const torch::Tensor take_lower = x < (lower + val) * 0.5f;
  torch::Tensor code =
      torch::where(up, torch::where(take_upper, upper_pivot, pivot), torch::where(take_lower, lower_pivot, pivot));
  if (is_signed) {  // the stored value keeps x's sign
    const torch::Tensor stored = map.index_select(0, code.reshape({-1})).view_as(x);
    const torch::Tensor flipped = torch::signbit(stored) != torch::signbit(x);
    code = (code + torch::where(flipped, torch::where(x > 0, 1, -1), 0)).clamp(0, 255);  // NaN: 0 stays 0
  }
  return code;
}

}  // namespace megaton::optim
