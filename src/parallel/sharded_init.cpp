#include "parallel/sharded_init.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "core/error.h"

namespace megaton::parallel {

InitSpec InitSpec::xavier_uniform(int64_t fan_in, int64_t fan_out) {
  return {Kind::kUniform, std::sqrt(6.0 / double(fan_in + fan_out)), 0};
}

uint64_t row_seed(uint64_t seed, const std::string& name, int64_t row) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  for (unsigned char ch : name) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  auto splitmix = [](uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  };
  return splitmix(splitmix(h ^ splitmix(seed)) ^ static_cast<uint64_t>(row));
}

torch::Tensor init_shard(const std::string& name, const std::vector<int64_t>& global_shape, int partition_dim, int part,
                         int parts, const InitSpec& spec, uint64_t seed) {
  const int ndim = static_cast<int>(global_shape.size());
  MEGATON_ASSERT(ndim >= 1, "parameter ", name, " has no dimensions");
  MEGATON_ASSERT(partition_dim < ndim, "parameter ", name, ": partition dim ", partition_dim, " of a ", ndim,
                 "-d shape");
  std::vector<int64_t> shard_shape = global_shape;
  int64_t offset = 0;
  if (partition_dim >= 0) {
    MEGATON_ASSERT(global_shape[partition_dim] % parts == 0, "parameter ", name, ": dim ", partition_dim, " (",
                   global_shape[partition_dim], ") not divisible by ", parts);
    shard_shape[partition_dim] = global_shape[partition_dim] / parts;
    offset = shard_shape[partition_dim] * part;
  }
  const auto fp32 = torch::TensorOptions().dtype(torch::kFloat32);
  if (spec.kind == InitSpec::Kind::kZeros) return torch::zeros(shard_shape, fp32);
  if (spec.kind == InitSpec::Kind::kOnes) return torch::ones(shard_shape, fp32);

  // Random: walk the global rows (all dims but the last, row-major) that intersect this shard.
  const int64_t row_len = global_shape.back();
  const int64_t shard_row_len = shard_shape.back();
  torch::Tensor out = torch::empty(shard_shape, fp32);
  torch::Tensor out_rows = out.view({-1, shard_row_len});  // [shard rows, shard row length]
  // Strides of the global row index over dims [0, ndim-1).
  std::vector<int64_t> gstride(std::max(ndim - 1, 0), 1), sdim(shard_shape.begin(), shard_shape.end() - 1);
  for (int d = ndim - 3; d >= 0; --d) gstride[d] = gstride[d + 1] * global_shape[d + 1];
  const int64_t shard_rows = out_rows.size(0);
  std::vector<int64_t> idx(std::max(ndim - 1, 0), 0);  // index within the shard (over dims [0, ndim-1))
  for (int64_t r = 0; r < shard_rows; ++r) {
    // Global row index and dim-0 index of shard row r.
    int64_t grow = 0, dim0 = 0;
    for (int d = 0; d < ndim - 1; ++d) {
      const int64_t gi = idx[d] + (d == partition_dim ? offset : 0);
      grow += gi * gstride[d];
      if (d == 0) dim0 = gi;
    }
    if (ndim == 1) dim0 = 0;
    torch::Tensor dst = out_rows[r];
    if (spec.valid_rows > 0 && ndim >= 2 && dim0 >= spec.valid_rows) {
      dst.zero_();
    } else {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(row_seed(seed, name, grow));
      torch::Tensor row = torch::empty({row_len}, fp32);
      if (spec.kind == InitSpec::Kind::kNormal)
        row.normal_(0.0, spec.scale, gen);
      else
        row.uniform_(-spec.scale, spec.scale, gen);
      if (partition_dim == ndim - 1) row = row.narrow(0, offset, shard_row_len);
      dst.copy_(row);
    }
    for (int d = ndim - 2; d >= 0; --d) {  // next shard row (odometer over dims [0, ndim-1))
      if (++idx[d] < sdim[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

}  // namespace megaton::parallel
