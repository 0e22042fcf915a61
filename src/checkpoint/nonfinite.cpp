#include "checkpoint/nonfinite.h"

#include <cstring>

namespace megaton::checkpoint {

namespace {

// Elements of `n` words of type W whose exponent field (`mask`) is all ones.
template <typename W>
int64_t count_all_ones(const void* data, int64_t n, W mask) {
  const auto* p = static_cast<const unsigned char*>(data);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    W w;
    std::memcpy(&w, p + i * static_cast<int64_t>(sizeof(W)), sizeof(W));
    bad += (w & mask) == mask;
  }
  return bad;
}

}  // namespace

int64_t count_nonfinite(const torch::Tensor& t) {
  if (!t.is_floating_point()) return 0;
  if (t.is_cpu() && t.is_contiguous()) {
    switch (t.scalar_type()) {
      case torch::kFloat32:
        return count_all_ones<uint32_t>(t.data_ptr(), t.numel(), 0x7F800000u);
      case torch::kFloat64:
        return count_all_ones<uint64_t>(t.data_ptr(), t.numel(), 0x7FF0000000000000ull);
      case torch::kBFloat16:
        return count_all_ones<uint16_t>(t.data_ptr(), t.numel(), uint16_t{0x7F80});
      case torch::kFloat16:
        return count_all_ones<uint16_t>(t.data_ptr(), t.numel(), uint16_t{0x7C00});
      default:
        break;
    }
  }
  return t.numel() - torch::isfinite(t).sum().item<int64_t>();
}

}  // namespace megaton::checkpoint
