// How a [.., np, d] tensor of attention heads lies in memory, as the CUDA kernels that read it by 16-byte vectors of
// 16-bit elements take it: the dims before [np, d] as one row dim, rows one stride apart, heads another, d dense. The
// QKV interleave (ops::qkv_interleave_bias_grad_fused) and the folded ALiBi's widened heads (ops::fold_heads_fused)
// read their inputs so; both accept views (the QKV output's q, k, v; the first d columns of wider heads).
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <optional>

namespace megaton::ops {

struct HeadsLayout {
  int64_t row_stride = 0;   // elements from one row to the next
  int64_t head_stride = 0;  // elements from one head to the next (one head: the row stride, or d for a single row)
};

/// t [.., np, d] (dim >= 2) as rows of heads, or nullopt where d is not dense, the dims before [np, d] are not one
/// stride apart, a stride is not a multiple of 8, or the heads overlap (head stride < d).
inline std::optional<HeadsLayout> heads_layout(const torch::Tensor& t) {
  if (t.dim() < 2 || t.stride(-1) != 1) return std::nullopt;
  const int64_t np = t.size(-2), d = t.size(-1);
  std::optional<int64_t> row;  // the stride of the first dim before [np, d] holding more than one index
  int64_t expected = 0;        // what the next such dim's stride must be
  for (int64_t i = t.dim() - 3; i >= 0; --i) {
    if (t.size(i) == 1) continue;
    if (!row) {
      row = t.stride(i);
    } else if (t.stride(i) != expected) {
      return std::nullopt;
    }
    expected = t.stride(i) * t.size(i);
  }
  const int64_t head = np > 1 ? t.stride(-2) : row.value_or(d);
  const HeadsLayout layout{row.value_or(np * head), head};
  if (head < d || head % 8 != 0 || layout.row_stride % 8 != 0) return std::nullopt;
  return layout;
}

}  // namespace megaton::ops
