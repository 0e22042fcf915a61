// The folded ALiBi's attention inputs (src/ops/attention.cpp, attention_alibi_folded), CUDA: q' = [q, the query's
// extra columns], k' = [k, the key's extra columns] and v, written in one pass into one [rows, heads, 3, d + 8] buffer
// (v's 8 extra columns zero, never read). ATen's cat of q with an expanded (stride 0) tensor takes its non-vectorised
// batched copy: 0.23 ms a call at the GPT 1.3B shape on an H100 (~0.6 TB/s), two calls a layer, ~11 ms a step; here
// 16-byte vectors throughout. v is copied too so that the attention's saved inputs no longer hold the whole QKV output
// (a view of it kept it alive for the backward: its q and k thirds, 128 MB a layer at 1.3B, were dead weight).
// Plain CUDA (no torch headers); src/ops/alibi_fold_heads_cuda.cpp wraps it.
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

/// out [rows, heads, 3, d + 8] (contiguous) = ([q, q_extra], [k, k_extra[r / batch]], [v, 0]): q_extra [8] the same
/// for every row and head, k_extra [rows / batch, heads, 8] per sequence position (rows are [s, b] flattened,
/// b = batch). 16-bit elements (bf16 or fp16: bytes are copied), d % 8 == 0, every pointer 16-byte aligned and every
/// stride a multiple of 8. Throws std::invalid_argument on a violated precondition, std::runtime_error on a launch
/// failure.
void alibi_fold_heads(HeadsView q, HeadsView k, HeadsView v, const void* q_extra, const void* k_extra, void* out,
                      int64_t rows, int64_t batch, int64_t heads, int64_t d, cudaStream_t stream);

}  // namespace megaton::kernels
