#include <stdexcept>
#include <string>

#include "alibi_fold_kernels.h"
#include "kernel_util.cuh"

namespace megaton::kernels {

namespace {

using util::aligned16;
constexpr int kVec = 8;  // 16-bit elements per 16-byte vector

// One thread per 16-byte vector of the outputs: (row, head, vector v < d / 8 + 1) of q' then of k'. v < d / 8 copies
// from q or k, v = d / 8 the extra columns. Index: the type of the vector index and its divisions (32-bit where the
// outputs' vectors fit: integer division by a runtime value costs several times more in 64 bits).
template <typename Index>
__global__ void alibi_fold_heads_kernel(HeadsView q, HeadsView k, const uint4* __restrict__ q_extra,
                                        const uint4* __restrict__ k_extra, uint4* __restrict__ q_out,
                                        uint4* __restrict__ k_out, Index rows, Index batch, Index heads,
                                        Index vecs) {  // vecs = d / 8 + 1
  const Index per_tensor = rows * heads * vecs;
  const Index stride = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < 2 * per_tensor; i += stride) {
    const bool is_k = i >= per_tensor;
    const Index o = is_k ? i - per_tensor : i;  // [rows, heads, vecs] index
    const Index v = o % vecs, rh = o / vecs, h = rh % heads, r = rh / heads;
    uint4 value;
    if (v + 1 < vecs) {
      const HeadsView& in = is_k ? k : q;
      const auto* src = static_cast<const uint16_t*>(in.data) + int64_t(r) * in.row_stride +
                        int64_t(h) * in.head_stride + int64_t(v) * kVec;
      value = *reinterpret_cast<const uint4*>(src);
    } else {
      value = is_k ? k_extra[(r / batch) * heads + h] : q_extra[0];
    }
    (is_k ? k_out : q_out)[o] = value;
  }
}

}  // namespace

void alibi_fold_heads(HeadsView q, HeadsView k, const void* q_extra, const void* k_extra, void* q_out, void* k_out,
                      int64_t rows, int64_t batch, int64_t heads, int64_t d, cudaStream_t stream) {
  if (rows <= 0 || batch <= 0 || rows % batch != 0 || heads <= 0 || d <= 0 || d % kVec != 0)
    throw std::invalid_argument("alibi_fold_heads: rows " + std::to_string(rows) + ", batch " + std::to_string(batch) +
                                ", heads " + std::to_string(heads) + ", d " + std::to_string(d) +
                                " (positive, rows a multiple of batch, d of 8)");
  for (const HeadsView* in : {&q, &k}) {
    if (!aligned16(in->data) || in->row_stride % kVec != 0 || in->head_stride % kVec != 0)
      throw std::invalid_argument("alibi_fold_heads: q and k must be 16-byte aligned with strides multiple of 8");
  }
  if (!aligned16(q_extra) || !aligned16(k_extra) || !aligned16(q_out) || !aligned16(k_out))
    throw std::invalid_argument("alibi_fold_heads: the extra columns and the outputs must be 16-byte aligned");
  constexpr int kThreads = 256;
  const int64_t vecs = d / kVec + 1, work = 2 * rows * heads * vecs;
  const int64_t want = (work + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(want > (int64_t(1) << 20) ? (int64_t(1) << 20) : want);
  const auto* qx = static_cast<const uint4*>(q_extra);
  const auto* kx = static_cast<const uint4*>(k_extra);
  auto* qo = static_cast<uint4*>(q_out);
  auto* ko = static_cast<uint4*>(k_out);
  if (work + int64_t(blocks) * kThreads < (int64_t(1) << 32)) {  // the index and its last stride fit 32 bits
    alibi_fold_heads_kernel<uint32_t><<<blocks, kThreads, 0, stream>>>(
        q, k, qx, kx, qo, ko, uint32_t(rows), uint32_t(batch), uint32_t(heads), uint32_t(vecs));
  } else {
    alibi_fold_heads_kernel<int64_t><<<blocks, kThreads, 0, stream>>>(q, k, qx, kx, qo, ko, rows, batch, heads, vecs);
  }
  util::check(cudaGetLastError(), "alibi_fold_heads launch");
}

}  // namespace megaton::kernels
