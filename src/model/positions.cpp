#include "model/positions.h"

#include <cmath>

#include "core/error.h"

namespace megaton::model {

PositionType parse_position_type(const std::string& name) {
  if (name == "absolute") return PositionType::kAbsolute;
  if (name == "rotary") return PositionType::kRotary;
  if (name == "alibi") return PositionType::kAlibi;
  throw UsageError(str("--position-embedding-type: expected absolute|rotary|alibi, got '", name, "'"));
}

namespace {
std::vector<double> power_of_two_slopes(int n) {
  const double start = std::pow(2.0, -std::pow(2.0, -(std::log2(double(n)) - 3.0)));
  std::vector<double> out(n);
  for (int i = 0; i < n; ++i) out[i] = std::pow(start, i + 1);
  return out;
}
}  // namespace

std::vector<double> alibi_slopes(int heads) {
  MEGATON_ASSERT(heads > 0, "alibi needs at least one head");
  const double lg = std::log2(double(heads));
  if (lg == std::floor(lg)) return power_of_two_slopes(heads);
  const int closest = 1 << static_cast<int>(std::floor(lg));
  std::vector<double> out = power_of_two_slopes(closest);
  const std::vector<double> extra = power_of_two_slopes(2 * closest);
  for (size_t i = 0; i < extra.size() && static_cast<int>(out.size()) < heads; i += 2) out.push_back(extra[i]);
  return out;
}

torch::Tensor alibi_bias(int total_heads, int head_begin, int count, int64_t seq, torch::Device device) {
  const std::vector<double> all = alibi_slopes(total_heads);
  MEGATON_ASSERT(head_begin >= 0 && head_begin + count <= total_heads, "heads [", head_begin, ", ", head_begin + count,
                 ") outside ", total_heads);
  torch::Tensor slopes = torch::tensor(std::vector<double>(all.begin() + head_begin, all.begin() + head_begin + count),
                                       torch::kFloat64);                                       // [count]
  torch::Tensor pos = torch::arange(seq, torch::kFloat64);                                     // [seq]
  return (slopes.view({count, 1, 1}) * pos.view({1, 1, seq})).to(torch::kFloat32).to(device);  // [count, 1, seq]
}

std::pair<torch::Tensor, torch::Tensor> rotary_tables(int64_t seq, int64_t dim, torch::Device device, double base) {
  MEGATON_CHECK(dim % 2 == 0, UsageError, "rotary position embeddings need an even head dimension (got ", dim, ")");
  torch::Tensor inv_freq = 1.0 / torch::pow(base, torch::arange(0, dim, 2, torch::kFloat64) / double(dim));  // [dim/2]
  torch::Tensor t = torch::arange(seq, torch::kFloat64);                                                     // [seq]
  torch::Tensor freqs = torch::outer(t, inv_freq);     // [seq, dim/2]
  torch::Tensor emb = torch::cat({freqs, freqs}, -1);  // [seq, dim]
  auto to = [&](const torch::Tensor& x) { return x.to(torch::kFloat32).view({seq, 1, 1, dim}).to(device); };
  return {to(emb.cos()), to(emb.sin())};
}

torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const int64_t s = x.size(0), half = x.size(-1) / 2;
  torch::Tensor c = cos.narrow(0, 0, s).to(x.scalar_type());
  torch::Tensor sn = sin.narrow(0, 0, s).to(x.scalar_type());
  torch::Tensor rotated = torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * c + rotated * sn;
}

}  // namespace megaton::model
