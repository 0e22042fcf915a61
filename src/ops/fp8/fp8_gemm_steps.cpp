#include "ops/fp8/fp8_gemm_steps.h"

#include <tuple>

#include "core/error.h"
#include "ops/gelu_bias_grad.h"
#ifdef MEGATON_HAVE_CUDA
#include "ops/cublaslt_gemm.h"
#endif

namespace megaton::ops::fp8::steps {

torch::Tensor scale_for(ScalingTable& table, int slot, const torch::Tensor& t, bool record) {
  if (table.options().delayed()) return table.scale().narrow(0, slot, 1);
  const torch::Tensor amax = t.detach().abs().amax().to(torch::kFloat32).reshape({1});  // [1]
  if (record) table.record_amax(slot, amax);
  return table.scale_for(slot, amax);
}

void check_shapes(const torch::Tensor& x2, const torch::Tensor& w) {
  const bool gpu = x2.is_cuda();
  MEGATON_CHECK(w.size(0) % 16 == 0 && w.size(1) % 16 == 0 && (!gpu || x2.size(0) % 16 == 0), UsageError,
                "FP8 linear layers need their input and output features", gpu ? " and tokens" : "",
                " divisible by 16: x [", x2.size(0), ", ", x2.size(1), "], weight [", w.size(0), ", ", w.size(1), "]");
}

void bias_and_gelu_grad(torch::Tensor& dy2, const torch::Tensor& pre, bool db_wanted, const MainGrad& b_main,
                        torch::Tensor& db) {
  if (pre.defined())
    std::tie(dy2, db) = gelu_backward_bias_grad(dy2, pre, db_wanted ? b_main : MainGrad{});
  else if (db_wanted)
    db = bias_grad(dy2, b_main);
}

#ifdef MEGATON_HAVE_CUDA
torch::Tensor amax_cell(ScalingTable& table, int slot, bool record) {
  return table.options().delayed() && record ? table.amax_history()[0].narrow(0, slot, 1) : torch::Tensor();
}

torch::Tensor forward_gemm(const Fp8Matrix& qx, const Fp8Matrix& qw, const torch::Tensor& b, bool gelu,
                           torch::ScalarType dtype, GemmAlgoMemo* memo, torch::Tensor& pre) {
  const bool has_b = b.defined() && b.numel() > 0;
  MEGATON_ASSERT(has_b || !gelu, "forward_gemm: the GELU without a bias");
  torch::Tensor y = torch::empty({qx.bytes.size(0), qw.bytes.size(0)}, qx.bytes.options().dtype(dtype));  // [T, out]
  const lt::Fp8Operand ax{qx.bytes, qx.scale_inv, qx.format}, aw{qw.bytes, qw.scale_inv, qw.format};
  lt::Fp8Epilogue epilogue;
  if (has_b) epilogue.bias = b.to(dtype).contiguous();
  if (gelu) epilogue.gelu_pre = pre = torch::empty_like(y);
  // (fast accumulation in the forward, as Transformer Engine)
  if (lt::fp8_gemm(ax, aw, y, false, /*fast_accum=*/true, memo, epilogue)) return y;
  // No algorithm with the epilogue for these shapes: the bias and the GELU as ATen ops after a plain GEMM.
  MEGATON_CHECK(has_b && lt::fp8_gemm(ax, aw, y, false, true, memo), RuntimeError, "cuBLASLt offers no FP8 GEMM for x ",
                qx.bytes.sizes(), " and weight ", qw.bytes.sizes());
  y.add_(b);
  if (!gelu) return y;
  pre = y;
  return torch::gelu(pre, "tanh");
}

Fp8Matrix cast_output_grad(ScalingTable& table, int slot, bool record, bool transpose, torch::Tensor& dy2,
                           const torch::Tensor& pre, bool db_wanted, const MainGrad& b_main, torch::Tensor& db) {
  const Fp8Options& o = table.options();
  if (transpose && o.delayed() && o.fused_casts && cast_to_fp8_dbias_supported(dy2, pre))
    return cast_to_fp8_dbias(dy2, pre, scale_for(table, slot, dy2, record), table.format(slot),
                             amax_cell(table, slot, record), db_wanted, b_main, db);
  bias_and_gelu_grad(dy2, pre, db_wanted, b_main, db);
  // (after the GELU's derivative: tensorwise scaling takes the scale from d_pre's amax)
  return cast_to_fp8(dy2, scale_for(table, slot, dy2, record), table.format(slot), transpose,
                     amax_cell(table, slot, record));
}

std::pair<torch::Tensor, torch::Tensor> backward_gemms(const Fp8Matrix& qg, const torch::Tensor& w_t,
                                                       const torch::Tensor& w_sinv, const torch::Tensor& x_t,
                                                       const torch::Tensor& x_sinv, torch::ScalarType dtype,
                                                       bool want_dx, const MainGrad& main, GemmAlgoMemo* memo) {
  torch::Tensor dx, dw;  // [T, in]; [out, in] fp32 without a main grad
  const int64_t tokens = qg.bytes.size(0), out = qg.bytes.size(1);
  if (want_dx) {
    dx = torch::empty({tokens, w_t.size(0)}, w_t.options().dtype(dtype));
    MEGATON_CHECK(
        lt::fp8_gemm({qg.bytes, qg.scale_inv, qg.format}, {w_t, w_sinv, Format::kE4M3}, dx, false, false, memo),
        RuntimeError, "cuBLASLt offers no FP8 GEMM for dy ", qg.bytes.sizes(), " and w^T ", w_t.sizes());
  }
  if (!x_t.defined()) return {dx, dw};
  const bool overwrite = !main.defined() || consume_overwrite(main);
  torch::Tensor acc =
      main.defined() ? main.grad : torch::empty({out, x_t.size(0)}, w_t.options().dtype(torch::kFloat32));
  MEGATON_CHECK(
      lt::fp8_gemm({qg.bytes_t, qg.scale_inv, qg.format}, {x_t, x_sinv, Format::kE4M3}, acc, !overwrite, false, memo),
      RuntimeError, "cuBLASLt offers no FP8 GEMM for the weight gradient of dy ", qg.bytes.sizes());
  if (!main.defined()) dw = acc;
  return {dx, dw};
}
#endif

}  // namespace megaton::ops::fp8::steps
