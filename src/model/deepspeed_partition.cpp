#include "model/deepspeed_partition.h"

#include <algorithm>
#include <regex>

#include "core/error.h"

namespace megaton::model {

namespace {

std::vector<int64_t> partition_uniform(int64_t items, int parts) {
  std::vector<int64_t> b(static_cast<size_t>(parts) + 1, 0);
  if (items <= parts) {
    for (int p = 0; p <= parts; ++p) b[static_cast<size_t>(p)] = std::min<int64_t>(p, items);
    return b;
  }
  const int64_t chunk = items / parts, residual = items - chunk * parts;
  for (int p = 0; p <= parts; ++p) b[static_cast<size_t>(p)] = p * chunk + std::min<int64_t>(p, residual);
  return b;
}

// _lprobe: boundaries for a heaviest-part bound `bottleneck` over inclusive prefix sums `w`; whether they fit.
std::pair<std::vector<int64_t>, bool> lprobe(const std::vector<double>& w, int parts, double bottleneck) {
  const int64_t n = static_cast<int64_t>(w.size());
  std::vector<int64_t> b(static_cast<size_t>(parts) + 1, n);
  b[0] = 0;
  double bsum = bottleneck;
  const int64_t chunk = n / parts;
  int64_t step = chunk;
  for (int p = 1; p < parts; ++p) {
    while (step < n && w[static_cast<size_t>(step)] < bsum) step += chunk;
    const int64_t lo = step - chunk, hi = std::min(step, n);
    b[static_cast<size_t>(p)] = std::lower_bound(w.begin() + lo, w.begin() + hi, bsum) - w.begin();  // bisect_left
    if (b[static_cast<size_t>(p)] == n) {
      const double part = w.back() - w[static_cast<size_t>(b[static_cast<size_t>(p - 1)])];
      return {b, part < bottleneck};
    }
    bsum = w[static_cast<size_t>(b[static_cast<size_t>(p)] - 1)] + bottleneck;
  }
  return {b, bsum >= w.back()};
}

}  // namespace

std::vector<int64_t> deepspeed_partition_balanced(const std::vector<double>& weights, int parts) {
  const int64_t n = static_cast<int64_t>(weights.size());
  if (n <= parts) return partition_uniform(n, parts);
  std::vector<double> w(weights);
  for (size_t i = 1; i < w.size(); ++i) w[i] += w[i - 1];
  constexpr double eps = 1e-3;
  double lower = w.back() / parts, upper = w.back();
  while (upper > lower + eps) {
    const double mid = lower + (upper - lower) / 2;
    if (lprobe(w, parts, mid).second)
      upper = mid;
    else
      lower = mid + eps;
  }
  auto [b, ok] = lprobe(w, parts, upper);
  MEGATON_ASSERT(ok, "DeepSpeed's partition found no split for bottleneck ", upper);
  return b;
}

std::vector<int> deepspeed_type_partition(const std::string& method, int num_layers, int stages, bool half) {
  const std::string pattern = method.substr(method.find(':') + 1);
  std::regex re;
  try {
    re = std::regex(pattern, std::regex::ECMAScript | std::regex::icase);
  } catch (const std::regex_error& e) {
    throw UsageError(
        str("--pp-partition-method '", method, "': '", pattern, "' is not a regular expression (", e.what(), ")"));
  }
  std::vector<std::string> names = {"_to_float16", "EmbeddingPipe", "<lambda>"};
  const size_t first_layer = names.size();
  for (int i = 0; i < num_layers; ++i) names.push_back("ParallelTransformerLayerPipe");
  for (const char* n : {"undo", "MixedFusedLayerNorm", "EmbeddingPipe"}) names.push_back(n);
  if (half) names.push_back("float16_to_fp32");
  std::vector<double> weights;
  for (const auto& n : names) weights.push_back(std::regex_search(n, re) ? 1.0 : 0.0);
  const std::vector<int64_t> b = deepspeed_partition_balanced(weights, stages);
  std::vector<int> layers(static_cast<size_t>(stages), 0);
  for (int s = 0; s < stages; ++s)
    for (int64_t i = b[static_cast<size_t>(s)]; i < b[static_cast<size_t>(s) + 1]; ++i)
      if (static_cast<size_t>(i) >= first_layer && static_cast<size_t>(i) < first_layer + size_t(num_layers))
        ++layers[static_cast<size_t>(s)];
  return layers;
}

}  // namespace megaton::model
