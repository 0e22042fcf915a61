// The folded ALiBi's widened query and key heads (src/ops/attention.cpp, attention_alibi_folded), CUDA: q' = [q, the
// query's extra columns] and k' = [k, the key's extra columns] in one pass. ATen's cat of q with an expanded (stride 0)
// tensor takes its non-vectorised batched copy: 0.23 ms a call at the GPT 1.3B shape on an H100 (~0.6 TB/s), two calls
// a layer, ~11 ms a step; here 16-byte vectors throughout.
// Plain CUDA (no torch headers); src/ops/alibi_fold_cuda.cpp wraps it.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace megaton::kernels {

/// A head-major view of [rows, heads, d] 16-bit elements: element (r, h, j) at data[r row_stride + h head_stride + j].
struct HeadsView {
  const void* data = nullptr;
  int64_t row_stride = 0;
  int64_t head_stride = 0;
};

/// q_out, k_out [rows, heads, d + 8] (contiguous) = [q, q_extra] and [k, k_extra[r / batch]]: q_extra [8] the same for
/// every row and head, k_extra [rows / batch, heads, 8] per sequence position (rows are [s, b] flattened, b = batch).
/// 16-bit elements (bf16 or fp16: bytes are copied), d % 8 == 0, every pointer 16-byte aligned and every stride a
/// multiple of 8. Throws std::invalid_argument on a violated precondition, std::runtime_error on a launch failure.
void alibi_fold_heads(HeadsView q, HeadsView k, const void* q_extra, const void* k_extra, void* q_out, void* k_out,
                      int64_t rows, int64_t batch, int64_t heads, int64_t d, cudaStream_t stream);

}  // namespace megaton::kernels
