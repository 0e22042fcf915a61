// Fused cross-entropy over (vocabulary-parallel) logits, CUDA. The unfused path (src/parallel/tensor/cross_entropy.cpp)
// upcasts the logits to fp32 and makes ~10 passes over them (max, subtract, gather, exp, sum, divide; backward clone,
// scatter, multiply, downcast) and saves an fp32 softmax; at GPT-2 124M sizes ([32768, 50304] bf16) that is ~100 GB of
// memory traffic per iteration. Here the forward reads the logits once (online softmax: running max and rescaled sum in
// one pass) and the backward reads them once and writes the gradient once; nothing but three floats per row is saved.
//
// Per row r of logits [rows, cols] (cols = this TP rank's vocabulary slice; columns >= valid_cols are padding and
// count as -inf), global vocabulary ids [start, start + cols):
//   forward:  row_max[r] = max_v x[r, v];  row_sum[r] = sum_v exp(x[r, v] - row_max[r]);
//             target_logit[r] = x[r, target[r] - start] when this rank owns target[r], else 0.
//   The caller combines ranks: M = max over TP of row_max; S = sum over TP of row_sum * exp(row_max - M);
//   T = sum over TP of target_logit;  loss = log(S) + M - T.
//   backward: grad[r, v] = (exp(x[r, v] - M[r]) / S[r] - [v == target[r] - start]) * grad_loss[r]   (0 on padding).
// Plain CUDA (no torch headers) so nvcc builds it anywhere; src/parallel/tensor/cross_entropy_cuda.cpp wraps it.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "float_type.h"

namespace megaton::kernels {

/// Forward row statistics. logits [rows, cols] row-major (row stride cols), target [rows] int64 (global ids).
/// Outputs [rows] fp32 each. Asynchronous on `stream`.
void cross_entropy_row_stats(const void* logits, FloatType type, int64_t rows, int64_t cols, int64_t valid_cols,
                             const int64_t* target, int64_t start, float* row_max, float* row_sum, float* target_logit,
                             cudaStream_t stream);

/// Backward: grad [rows, cols] of the logits' type from the combined max M [rows], 1/S [rows] and grad_loss [rows].
/// grad may be logits itself (written in place); grad_loss may be null (1 for every row: softmax - one_hot).
void cross_entropy_backward(const void* logits, void* grad, FloatType type, int64_t rows, int64_t cols,
                            int64_t valid_cols, const int64_t* target, int64_t start, const float* global_max,
                            const float* inv_sum, const float* grad_loss, cudaStream_t stream);

/// How cross_entropy_loss_grad reads a row once. kSharedRow: a block of 512 threads per row, the row in its shared
/// memory (cols * element bytes, up to the device's per-block opt-in limit). kCluster4 / kCluster8: the row split
/// over a cluster of 4 / 8 blocks of 256 threads, each holding its slice in shared memory, the partial (max, sum)
/// pairs exchanged through distributed shared memory (sm_90 hardware and code). kL2: a block of 1024 threads per row
/// reads it twice from global memory, the second read right after the first (mostly from L2), no shared-memory row.
/// perf/bench_cross_entropy.cpp (BM_CrossEntropyLossGradVariants) measures them against the two-kernel path.
enum class LossGradVariant { kSharedRow, kCluster4, kCluster8, kL2 };

/// Loss and unscaled gradient at once, for logits holding the whole vocabulary (TP = 1): loss [rows] fp32 =
/// log(S) + M - x[target] as above, and the logits overwritten with softmax - one_hot(target) (0 on padding), each
/// row read from global memory once (but kL2's second read) and written once. Needs 16-byte aligned rows. Returns
/// false, launching nothing, when `variant` does not take the row (misaligned, too large for shared memory, no sm_90
/// for a cluster): the caller then runs cross_entropy_row_stats and an in-place cross_entropy_backward with grad_loss
/// null.
bool cross_entropy_loss_grad(void* logits, FloatType type, int64_t rows, int64_t cols, int64_t valid_cols,
                             const int64_t* target, float* loss, cudaStream_t stream,
                             LossGradVariant variant = LossGradVariant::kSharedRow);

/// The LM head's backward (src/parallel/tensor/lm_head_loss.cpp): out[r, c] = x[r, c] * scale[r] for x, out
/// [rows, cols] row-major of `type` (out may be x) and scale [rows] fp32, the product in fp32 rounded once to `type`:
/// ATen's `mul_out(out, x, scale.view({rows, 1}))` bit for bit, which with mixed dtypes takes its unvectorised
/// kernel (~0.9 TB/s on an H200). 16-byte loads and stores where cols and both pointers allow; asynchronous on
/// `stream`.
void scale_rows(const void* x, void* out, FloatType type, int64_t rows, int64_t cols, const float* scale,
                cudaStream_t stream);

}  // namespace megaton::kernels
