#include "parallel/data/data_parallel_layout.h"

#include <algorithm>

#include "core/error.h"

namespace megaton::parallel {

BufferLayout::BufferLayout(const ParamList& params, int64_t bucket_numel, int pad_multiple)
    : pad_multiple_(pad_multiple), slots_(params.size()) {
  MEGATON_ASSERT(pad_multiple >= 1, "pad multiple ", pad_multiple);
  MEGATON_CHECK(!params.empty(), UsageError, "data-parallel buffer: the parameter list is empty");
  Bucket current;
  int64_t filled = 0;  // unpadded elements in `current`
  auto close_bucket = [&]() {
    const int64_t padded = (filled + pad_multiple - 1) / pad_multiple * pad_multiple;
    current.numel = padded;
    numel_ = current.start + padded;
    buckets_.push_back(std::move(current));
    current = Bucket{};
    current.start = numel_;
    filled = 0;
  };
  for (size_t k = params.size(); k-- > 0;) {
    const auto& p = params[k];
    MEGATON_CHECK(p.param.defined(), UsageError, "parameter '", p.name, "' has no tensor");
    ParamSlot& s = slots_[k];
    s.offset = current.start + filled;
    s.numel = p.param.numel();
    s.bucket = static_cast<int>(buckets_.size());
    current.params.push_back(k);
    current.has_tied_embedding |= p.tied_embedding;
    filled += s.numel;
    if (bucket_numel > 0 && filled >= bucket_numel) close_bucket();
  }
  if (filled > 0 || !current.params.empty()) close_bucket();
}

std::vector<ParamPiece> BufferLayout::shard_pieces(int rank, int size) const {
  MEGATON_ASSERT(size >= 1 && rank >= 0 && rank < size, "shard ", rank, " of ", size);
  std::vector<ParamPiece> pieces;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const Bucket& bk = buckets_[b];
    MEGATON_ASSERT(bk.numel % size == 0, "bucket ", b, " of ", bk.numel, " elements is not padded to ", size);
    const int64_t len = bk.numel / size;
    const int64_t lo = bk.start + rank * len, hi = lo + len;
    const int64_t shard_base = shard_bucket_offset(static_cast<int>(b), size);
    for (size_t k : bk.params) {
      const ParamSlot& s = slots_[k];
      const int64_t a = std::max(lo, s.offset), e = std::min(hi, s.offset + s.numel);
      if (a >= e) continue;
      pieces.push_back(ParamPiece{k, a - s.offset, shard_base + (a - lo), e - a});
    }
  }
  return pieces;
}

}  // namespace megaton::parallel
