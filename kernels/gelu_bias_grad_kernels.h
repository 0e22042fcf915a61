// The MLP's GELU backward with fc1's bias gradient fused in, CUDA. ATen runs gelu_backward (reads d_act and pre,
// writes d_pre) and then sum(0) over d_pre (reads it again): for GPT 1.3B that second read is 268 MB per layer, ~2.3 ms
// of a step on an H200. Here one pass reads d_act and pre, writes d_pre and leaves the column sums as fp32 partials
// per block of rows; a second, small kernel sums the partials in a fixed order (deterministic on one GPU).
//
// Per element, fp32 whatever the element type, in the order of ATen's GeluBackwardCUDAKernelImpl (approximate="tanh"):
//   inner = beta (x + kappa x^3), beta = sqrt(2/pi), kappa = 0.044715;  t = tanh(inner)
//   d_pre = d_act * (0.5 (1 + t) + 0.5 x (1 - t^2) beta (1 + 3 kappa x^2))      rounded to the element type
//   db[j] = sum_r d_pre[r, j]  over the rounded values (what ATen's sum reads), accumulated in fp32
// d_act, pre, d_pre [rows, cols] row-major; db [cols]; all of one element type, every pointer 16-byte aligned and
// cols % 8 == 0 (loads and stores are 8-element vectors). Plain CUDA; src/ops/gelu_bias_grad_cuda.cpp wraps it.
#pragma once
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <vector>

#include "column_sum_out.h"
#include "float_type.h"

namespace megaton::kernels {

/// How the GELU kernel spreads its work. Each thread owns 8 columns and loads `rows_in_flight` rows of d_act and pre
/// before computing any (more bytes in flight per thread, more registers); `blocks_per_sm` is the kernel's
/// __launch_bounds__ minimum of 256-thread blocks per SM (registers per thread <= 65536 / (256 * blocks_per_sm): more
/// warps to hide the tanh arithmetic behind other warps' loads, fewer registers, spills past ~64). The GELU gradient
/// is arithmetic-heavy (tanhf): at the default the kernel runs at ~2.9 TB/s, below the bandwidth the plain column
/// sums reach. Compiled pairs: (4, 2) the default, (2, 2), (2, 3), (4, 3), (2, 4), (1, 4), (1, 5); perf/
/// bench_gelu_bias_grad.cpp's BM_GeluBiasGradTuning measures them.
struct GeluBiasGradTuning {
  int rows_in_flight = 4;
  int blocks_per_sm = 2;
};

/// The compiled pairs, the default first (the others throw std::invalid_argument).
std::vector<GeluBiasGradTuning> gelu_bias_grad_tunings();

/// The plain column-sum kernel's (bias_grad's) blocks per SM.
inline constexpr int kBiasGradBlocksPerSm = 2;

/// Rows of fp32 partial sums either kernel wants in its workspace (workspace: partials * cols floats): one wave of
/// `blocks_per_sm` blocks per SM (the GELU kernel's tuning.blocks_per_sm, or kBiasGradBlocksPerSm).
int64_t gelu_bias_grad_partials(int64_t rows, int64_t cols, int blocks_per_sm = kBiasGradBlocksPerSm);

/// Writes d_pre and db (every function here: db an element-type vector, or sums added into an fp32 main grad,
/// kernels/column_sum_out.h). type: bf16 or fp16 (fp32 is not vectorised here; the caller uses ATen for it).
/// Asynchronous on `stream`; throws std::invalid_argument for a shape, alignment or tuning it does not take and
/// std::runtime_error when a launch fails.
void gelu_backward_bias_grad(const void* d_act, const void* pre, void* d_pre, const ColumnSumOut& db, float* workspace,
                             int64_t partials, FloatType type, int64_t rows, int64_t cols, cudaStream_t stream,
                             const GeluBiasGradTuning& tuning = {});

/// The same column sums without the GELU: db[j] = sum_r dy[r, j] (a linear layer's bias gradient; ATen's sum(0) reads
/// at ~2.3 TB/s on an H200), fp32 partials in a fixed order as above. dy [rows, cols], db [cols]; bf16 or fp16, dy
/// 16-byte aligned, cols % 8 == 0. Throws as gelu_backward_bias_grad.
void bias_grad(const void* dy, const ColumnSumOut& db, float* workspace, int64_t partials, FloatType type, int64_t rows,
               int64_t cols, cudaStream_t stream);

/// The attention's QKV gradient from the three the attention's backward gives, and the QKV bias gradient, in one pass:
/// d_qkv[r, h 3d + p d + j] = part_p[r, h d + j] for the parts p = 0, 1, 2 = dq, dk, dv ([rows, heads d] each), i.e.
/// the [rows, heads, 3, d] layout of Megatron's query_key_value output, and db [3 heads d] its column sums (fp32
/// partials in a fixed order as above; the workspace as for cols = 3 heads d at kBiasGradBlocksPerSm). bf16 or fp16,
/// every pointer 16-byte aligned, d % 8 == 0. Throws as gelu_backward_bias_grad.
/// head_strides: where a part's heads are wider than d (the folded ALiBi's dq and dk of d + 8 columns, narrowed to d):
/// part p is [rows, heads, head_strides[p]] with its first d columns read; 0 (the default) means d. Each a multiple
/// of 8, >= d.
void qkv_interleave_bias_grad(const void* dq, const void* dk, const void* dv, void* d_qkv, const ColumnSumOut& db,
                              float* workspace, int64_t partials, FloatType type, int64_t rows, int64_t heads,
                              int64_t head_dim, cudaStream_t stream, const std::array<int64_t, 3>& head_strides = {});

}  // namespace megaton::kernels
