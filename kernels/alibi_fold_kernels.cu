#include <stdexcept>
#include <string>

#include "alibi_fold_kernels.h"
#include "kernel_util.cuh"

namespace megaton::kernels {

namespace {

using util::aligned16;
constexpr int kVec = 8;  // 16-bit elements per 16-byte vector

// One thread per 16-byte vector of the output [rows, heads, 3, vecs]: vector c < d / 8 copies from q, k or v (part 0,
// 1, 2), c = d / 8 is the part's extra columns (zero for v). Index: the type of the vector index and its divisions
// (32-bit where the output's vectors fit: integer division by a runtime value costs several times more in 64 bits).
template <typename Index>
__global__ void alibi_fold_heads_kernel(HeadsView q, HeadsView k, HeadsView v, const uint4* __restrict__ q_extra,
                                        const uint4* __restrict__ k_extra, uint4* __restrict__ out, Index rows,
                                        Index batch, Index heads, Index vecs) {  // vecs = d / 8 + 1
  const Index total = rows * heads * 3 * vecs;
  const Index stride = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const Index c = i % vecs, rest = i / vecs, part = rest % 3, rh = rest / 3, h = rh % heads, r = rh / heads;
    uint4 value;
    if (c + 1 < vecs) {
      // Scalars chosen, not a HeadsView reference: that would copy the views to the stack.
      const void* data = part == 0 ? q.data : (part == 1 ? k.data : v.data);
      const int64_t row_stride = part == 0 ? q.row_stride : (part == 1 ? k.row_stride : v.row_stride);
      const int64_t head_stride = part == 0 ? q.head_stride : (part == 1 ? k.head_stride : v.head_stride);
      const auto* src =
          static_cast<const uint16_t*>(data) + int64_t(r) * row_stride + int64_t(h) * head_stride + int64_t(c) * kVec;
      value = *reinterpret_cast<const uint4*>(src);
    } else if (part == 0) {
      value = q_extra[0];
    } else if (part == 1) {
      value = k_extra[(r / batch) * heads + h];
    } else {
      value = make_uint4(0, 0, 0, 0);
    }
    out[i] = value;
  }
}

}  // namespace

void alibi_fold_heads(HeadsView q, HeadsView k, HeadsView v, const void* q_extra, const void* k_extra, void* out,
                      int64_t rows, int64_t batch, int64_t heads, int64_t d, cudaStream_t stream) {
  if (rows <= 0 || batch <= 0 || rows % batch != 0 || heads <= 0 || d <= 0 || d % kVec != 0)
    throw std::invalid_argument("alibi_fold_heads: rows " + std::to_string(rows) + ", batch " + std::to_string(batch) +
                                ", heads " + std::to_string(heads) + ", d " + std::to_string(d) +
                                " (positive, rows a multiple of batch, d of 8)");
  for (const HeadsView* in : {&q, &k, &v}) {
    if (!aligned16(in->data) || in->row_stride % kVec != 0 || in->head_stride % kVec != 0)
      throw std::invalid_argument("alibi_fold_heads: q, k and v must be 16-byte aligned with strides multiple of 8");
  }
  if (!aligned16(q_extra) || !aligned16(k_extra) || !aligned16(out))
    throw std::invalid_argument("alibi_fold_heads: the extra columns and the output must be 16-byte aligned");
  constexpr int kThreads = 256;
  const int64_t vecs = d / kVec + 1, work = rows * heads * 3 * vecs;
  const int64_t want = (work + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(want > (int64_t(1) << 20) ? (int64_t(1) << 20) : want);
  const auto* qx = static_cast<const uint4*>(q_extra);
  const auto* kx = static_cast<const uint4*>(k_extra);
  auto* o = static_cast<uint4*>(out);
  if (work + int64_t(blocks) * kThreads < (int64_t(1) << 32)) {  // the index and its last stride fit 32 bits
    alibi_fold_heads_kernel<uint32_t><<<blocks, kThreads, 0, stream>>>(
        q, k, v, qx, kx, o, uint32_t(rows), uint32_t(batch), uint32_t(heads), uint32_t(vecs));
  } else {
    alibi_fold_heads_kernel<int64_t><<<blocks, kThreads, 0, stream>>>(q, k, v, qx, kx, o, rows, batch, heads, vecs);
  }
  util::check(cudaGetLastError(), "alibi_fold_heads launch");
}

}  // namespace megaton::kernels
