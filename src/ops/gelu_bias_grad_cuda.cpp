// The CUDA paths of ops::gelu_backward_bias_grad and ops::bias_grad: kernels/gelu_bias_grad_kernels.cu on the current
// stream.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <optional>
#include <stdexcept>

#include "core/error.h"
#include "core/kernel_float_type.h"
#include "gelu_bias_grad_kernels.h"  // kernels/
#include "ops/aligned.h"
#include "ops/gelu_bias_grad.h"
#include "ops/heads_layout.h"

namespace megaton::ops {

bool gelu_bias_grad_fused_supported(const torch::Tensor& d_act, const torch::Tensor& pre) {
  const auto t = d_act.scalar_type();
  return d_act.is_cuda() && pre.device() == d_act.device() && (t == torch::kBFloat16 || t == torch::kFloat16) &&
         pre.scalar_type() == t && d_act.dim() == 2 && pre.sizes() == d_act.sizes() && d_act.numel() > 0 &&
         d_act.size(1) % 8 == 0;
}

namespace {

// db [n] = the column sums of dy [T, n] (aligned, contiguous) by one of the column-sum kernels: `run(out, workspace,
// partials, type, stream)` launches it with an fp32 workspace of the partials the kernels want at `blocks_per_sm`, on
// dy's device and current stream; out is db, or `main` (returning db undefined) where it takes the sums. A kernel's
// std::invalid_argument / runtime_error becomes a RuntimeError naming `what`.
template <typename Run>
torch::Tensor column_sums(const torch::Tensor& dy, const char* what, int blocks_per_sm, const MainGrad& main,
                          Run&& run) {
  const int64_t rows = dy.size(0), cols = dy.size(1);
  torch::Tensor db;  // [n], unless the sums go into main
  const kernels::ColumnSumOut out = column_sum_out(main, cols, dy.options(), db);
  const int64_t partials = kernels::gelu_bias_grad_partials(rows, cols, blocks_per_sm);
  torch::Tensor workspace = torch::empty({partials, cols}, dy.options().dtype(torch::kFloat32));  // [P, n]
  try {
    run(out, workspace.data_ptr<float>(), partials, kernel_float_type(dy, what),
        c10::cuda::getCurrentCUDAStream(dy.device().index()).stream());
  } catch (const std::exception& e) {
    throw RuntimeError(str(what, ": ", e.what()));
  }
  return db;
}

}  // namespace

std::pair<torch::Tensor, torch::Tensor> gelu_backward_bias_grad_fused(const torch::Tensor& d_act,
                                                                      const torch::Tensor& pre,
                                                                      const kernels::GeluBiasGradTuning& tuning,
                                                                      const MainGrad& main) {
  MEGATON_ASSERT(gelu_bias_grad_fused_supported(d_act, pre), "gelu_backward_bias_grad_fused: d_act ", d_act.sizes(),
                 " ", c10::toString(d_act.scalar_type()), ", pre ", pre.sizes(), " ", c10::toString(pre.scalar_type()));
  const c10::cuda::CUDAGuard guard(d_act.device());
  const torch::Tensor dy = aligned_contiguous(d_act), x = aligned_contiguous(pre);  // [T, f]
  torch::Tensor d_pre = torch::empty_like(dy);                                      // [T, f]
  torch::Tensor db = column_sums(
      dy, "gelu_backward_bias_grad", tuning.blocks_per_sm, main,
      [&](const kernels::ColumnSumOut& out, float* ws, int64_t partials, kernels::FloatType type, cudaStream_t stream) {
        kernels::gelu_backward_bias_grad(dy.data_ptr(), x.data_ptr(), d_pre.data_ptr(), out, ws, partials, type,
                                         dy.size(0), dy.size(1), stream, tuning);
      });
  return {d_pre, db};
}

namespace {

// A part [.., np, d] of the QKV gradient as the interleave kernel reads it: rows of np heads, each head_stride elements
// wide with its first d used (contiguous: d; the folded ALiBi's dq, dk narrowed from d + 8: d + 8), the rows dense
// (np head strides apart). 0 where the part is laid out otherwise.
int64_t interleave_head_stride(const torch::Tensor& part) {
  const std::optional<HeadsLayout> l = heads_layout(part);
  return l && l->row_stride == part.size(-2) * l->head_stride ? l->head_stride : 0;
}

}  // namespace

bool qkv_interleave_fused_supported(const torch::Tensor& dq, const torch::Tensor& dk, const torch::Tensor& dv) {
  const auto t = dq.scalar_type();
  if (!dq.is_cuda() || (t != torch::kBFloat16 && t != torch::kFloat16) || dq.dim() < 2 || dq.numel() == 0) return false;
  for (const torch::Tensor* p : {&dq, &dk, &dv}) {
    if (p->device() != dq.device() || p->scalar_type() != t || p->sizes() != dq.sizes() ||
        interleave_head_stride(*p) == 0 || !aligned16(*p))
      return false;
  }
  return dq.size(-1) % 8 == 0;
}

std::pair<torch::Tensor, torch::Tensor> qkv_interleave_bias_grad_fused(const torch::Tensor& dq, const torch::Tensor& dk,
                                                                       const torch::Tensor& dv, const MainGrad& main) {
  MEGATON_ASSERT(qkv_interleave_fused_supported(dq, dk, dv), "qkv_interleave_bias_grad_fused: dq ", dq.sizes(), " ",
                 c10::toString(dq.scalar_type()), ", dk ", dk.sizes(), ", dv ", dv.sizes());
  const c10::cuda::CUDAGuard guard(dq.device());
  const int64_t np = dq.size(-2), d = dq.size(-1), rows = dq.numel() / (np * d);
  std::vector<int64_t> shape = dq.sizes().vec();
  shape.insert(shape.end() - 1, 3);
  torch::Tensor d_qkv = torch::empty(shape, dq.options());  // [.., np, 3, d]
  const torch::Tensor rows_view = d_qkv.view({rows, 3 * np * d});
  torch::Tensor db = column_sums(
      rows_view, "qkv_interleave_bias_grad", kernels::kBiasGradBlocksPerSm, main,
      [&](const kernels::ColumnSumOut& out, float* ws, int64_t partials, kernels::FloatType type, cudaStream_t s) {
        kernels::qkv_interleave_bias_grad(
            dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), d_qkv.data_ptr(), out, ws, partials, type, rows, np, d, s,
            {interleave_head_stride(dq), interleave_head_stride(dk), interleave_head_stride(dv)});
      });
  return {d_qkv, db};
}

torch::Tensor bias_grad_fused(const torch::Tensor& dy_in, const MainGrad& main) {
  MEGATON_ASSERT(gelu_bias_grad_fused_supported(dy_in, dy_in), "bias_grad_fused: dy ", dy_in.sizes(), " ",
                 c10::toString(dy_in.scalar_type()));
  const c10::cuda::CUDAGuard guard(dy_in.device());
  const torch::Tensor dy = aligned_contiguous(dy_in);  // [T, n]
  return column_sums(
      dy, "bias_grad", kernels::kBiasGradBlocksPerSm, main,
      [&](const kernels::ColumnSumOut& out, float* ws, int64_t partials, kernels::FloatType type, cudaStream_t stream) {
        kernels::bias_grad(dy.data_ptr(), out, ws, partials, type, dy.size(0), dy.size(1), stream);
      });
}

}  // namespace megaton::ops
