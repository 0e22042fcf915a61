#include "ops/fp8/fp8_mlp.h"

#include <torch/csrc/autograd/custom_function.h>

#include <tuple>

#include "core/error.h"
#include "ops/fp8/fp8_gemm_steps.h"
#ifdef MEGATON_HAVE_CUDA
#include "ops/cublaslt_gemm.h"
#include "ops/fp8/fp8_cast.h"
#endif

namespace megaton::ops::fp8 {

bool fp8_mlp_supported(const torch::Tensor& x, const Fp8MlpParams& p) {
#ifdef MEGATON_HAVE_CUDA
  const auto t = x.scalar_type();
  return x.is_cuda() && (t == torch::kBFloat16 || t == torch::kFloat16) && p.b1.defined() && p.fc1.defined() &&
         p.fc2.defined() && p.fc1.table == p.fc2.table && p.fc1.table->options().delayed() &&
         p.fc1.table->options().wgrad && p.fc1.table->options().fused_casts;
#else
  (void)x, (void)p;
  return false;
#endif
}

#ifdef MEGATON_HAVE_CUDA
namespace {

using steps::amax_cell;
using steps::scale_for;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Saved tensors, in order.
enum Saved { kW1T, kW1Sinv, kXT, kXSinv, kPre, kW2T, kW2Sinv, kActT, kActSinv };

// fc1 and the GELU: act = fp8(gelu(x w1^T + b1)) under fc2's input scale [T, f] with its transpose, and pre (the
// GELU's input, for the backward). Written by the GEMM where cuBLASLt has an FP8-output algorithm; else the 16-bit
// activation and then its cast.
Fp8Matrix fc1_gelu_fp8(const Fp8Matrix& qx, const Fp8Matrix& qw1, const torch::Tensor& b1, const Fp8LinearSlots& fc1,
                       const Fp8LinearSlots& fc2, bool record, torch::ScalarType dtype, torch::Tensor& pre) {
  ScalingTable& table = *fc1.table;
  const int64_t tokens = qx.bytes.size(0), f = qw1.bytes.size(0);
  const auto options = qx.bytes.options();
  const torch::Tensor scale = scale_for(table, fc2.input, torch::Tensor(), record);  // delayed: the slot's scale
  Fp8Matrix qa = new_fp8_matrix(tokens, f, qx.bytes.device(), scale, table.format(fc2.input), false);
  pre = torch::empty({tokens, f}, options.dtype(dtype));
  const torch::Tensor amax = torch::empty({1}, options.dtype(torch::kFloat32));  // set by the GEMM
  lt::Fp8Epilogue e;
  e.bias = b1.to(dtype).contiguous();
  e.gelu_pre = pre;
  e.d_scale = scale;
  e.d_amax = amax;
  e.d_format = qa.format;
  if (lt::fp8_gemm({qx.bytes, qx.scale_inv, qx.format}, {qw1.bytes, qw1.scale_inv, qw1.format}, qa.bytes, false,
                   /*fast_accum=*/true, fc1.memo.get(), e)) {
    if (torch::Tensor cell = amax_cell(table, fc2.input, record); cell.defined()) torch::maximum_out(cell, cell, amax);
    qa.bytes_t = transpose_fp8(qa.bytes);  // [f, T]
    return qa;
  }
  const torch::Tensor act = steps::forward_gemm(qx, qw1, b1, /*gelu=*/true, dtype, fc1.memo.get(), pre);  // [T, f]
  return cast_to_fp8(act, scale, qa.format, true, amax_cell(table, fc2.input, record));
}

struct Fp8Mlp : torch::autograd::Function<Fp8Mlp> {
  // b2: [h] or an empty placeholder; m*/o*: ops/linear.h's main_grad_inputs of w1, b1, w2, b2.
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, torch::Tensor w1, torch::Tensor b1,
                               torch::Tensor w2, torch::Tensor b2, torch::Tensor m1, torch::Tensor o1,
                               torch::Tensor bm1, torch::Tensor bo1, torch::Tensor m2, torch::Tensor o2,
                               torch::Tensor bm2, torch::Tensor bo2, Fp8LinearSlots fc1, Fp8LinearSlots fc2,
                               bool record) {
    ScalingTable& table = *fc1.table;
    const auto dtype = x.scalar_type();
    const torch::Tensor x2 = x.reshape({-1, x.size(-1)}).contiguous();  // [T, h]
    steps::check_shapes(x2, w1);
    MEGATON_ASSERT(w2.size(1) == w1.size(0), "fp8_mlp: fc1 ", w1.sizes(), " and fc2 ", w2.sizes());
    const Fp8Matrix qx = cast_to_fp8(x2, scale_for(table, fc1.input, x2, record), table.format(fc1.input), true,
                                     amax_cell(table, fc1.input, record));
    const Fp8Matrix qw1 = cast_to_fp8(w1.contiguous(), scale_for(table, fc1.weight, w1, record),
                                      table.format(fc1.weight), true, amax_cell(table, fc1.weight, record));
    torch::Tensor pre;                                                             // [T, f]
    const Fp8Matrix qa = fc1_gelu_fp8(qx, qw1, b1, fc1, fc2, record, dtype, pre);  // [T, f] FP8
    const Fp8Matrix qw2 = cast_to_fp8(w2.contiguous(), scale_for(table, fc2.weight, w2, record),
                                      table.format(fc2.weight), true, amax_cell(table, fc2.weight, record));
    const bool has_b2 = b2.numel() > 0;
    torch::Tensor unused;
    const torch::Tensor y2 =
        steps::forward_gemm(qa, qw2, has_b2 ? b2 : torch::Tensor(), false, dtype, fc2.memo.get(), unused);  // [T, h]
    ctx->save_for_backward({qw1.bytes_t, qw1.scale_inv, qx.bytes_t, qx.scale_inv, pre, qw2.bytes_t, qw2.scale_inv,
                            qa.bytes_t, qa.scale_inv});
    ctx->saved_data["w1_dtype"] = w1.scalar_type();
    ctx->saved_data["w2_dtype"] = w2.scalar_type();
    ctx->saved_data["has_b2"] = has_b2;
    for (const auto& [key, t] : {std::pair{"m1", &m1},
                                 {"o1", &o1},
                                 {"bm1", &bm1},
                                 {"bo1", &bo1},
                                 {"m2", &m2},
                                 {"o2", &o2},
                                 {"bm2", &bm2},
                                 {"bo2", &bo2}})
      ctx->saved_data[key] = *t;
    // The table and the layers' memos outlive every backward (the model owns them).
    ctx->saved_data["table"] = reinterpret_cast<int64_t>(fc1.table);
    ctx->saved_data["memo1"] = reinterpret_cast<int64_t>(fc1.memo.get());
    ctx->saved_data["memo2"] = reinterpret_cast<int64_t>(fc2.memo.get());
    ctx->saved_data["g1"] = fc1.grad_output;
    ctx->saved_data["g2"] = fc2.grad_output;
    ctx->saved_data["record"] = record;
    std::vector<int64_t> y_shape = x.sizes().vec();
    y_shape.back() = w2.size(0);
    return y2.view(y_shape);  // [.., h]
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list s = ctx->get_saved_variables();
    auto& table = *reinterpret_cast<ScalingTable*>(ctx->saved_data["table"].toInt());
    auto* memo1 = reinterpret_cast<GemmAlgoMemo*>(ctx->saved_data["memo1"].toInt());
    auto* memo2 = reinterpret_cast<GemmAlgoMemo*>(ctx->saved_data["memo2"].toInt());
    const bool record = ctx->saved_data["record"].toBool();
    const torch::Tensor& dy = grads[0];                              // [.., h]
    torch::Tensor dy2 = dy.reshape({-1, dy.size(-1)}).contiguous();  // [T, h]
    const auto dtype = dy.scalar_type();
    const bool db1_wanted = ctx->needs_input_grad(2);
    const bool db2_wanted = ctx->saved_data["has_b2"].toBool() && ctx->needs_input_grad(4);
    torch::Tensor db1, db2;  // undefined where not wanted or gone into their main grads
    // fc2: its output gradient's cast with its bias gradient, then its GEMMs; d_act [T, f].
    const Fp8Matrix qg2 = steps::cast_output_grad(table, static_cast<int>(ctx->saved_data["g2"].toInt()), record, true,
                                                  dy2, {}, db2_wanted, saved_main_grad(ctx, "bm2", "bo2"), db2);
    auto [d_act, dw2] = steps::backward_gemms(qg2, s[kW2T], s[kW2Sinv], s[kActT], s[kActSinv], dtype, true,
                                              saved_main_grad(ctx, "m2", "o2"), memo2);
    // fc1: the GELU's derivative, its cast and fc1's bias gradient, then fc1's GEMMs.
    const Fp8Matrix qg1 = steps::cast_output_grad(table, static_cast<int>(ctx->saved_data["g1"].toInt()), record, true,
                                                  d_act, s[kPre], db1_wanted, saved_main_grad(ctx, "bm1", "bo1"), db1);
    auto [dx2, dw1] = steps::backward_gemms(qg1, s[kW1T], s[kW1Sinv], s[kXT], s[kXSinv], dtype,
                                            ctx->needs_input_grad(0), saved_main_grad(ctx, "m1", "o1"), memo1);
    std::vector<int64_t> x_shape = dy.sizes().vec();
    if (dx2.defined()) x_shape.back() = dx2.size(1);
    const auto as_param = [&](const torch::Tensor& g, int input, const char* dtype_key) {
      return g.defined() && ctx->needs_input_grad(input) ? g.to(ctx->saved_data[dtype_key].toScalarType())
                                                         : torch::Tensor();
    };
    variable_list out(16);
    out[0] = dx2.defined() ? dx2.view(x_shape) : torch::Tensor();
    out[1] = as_param(dw1, 1, "w1_dtype");
    out[2] = db1_wanted ? db1 : torch::Tensor();
    out[3] = as_param(dw2, 3, "w2_dtype");
    out[4] = db2_wanted ? db2 : torch::Tensor();
    return out;
  }
};

}  // namespace
#endif

torch::Tensor fp8_mlp(const torch::Tensor& x, const Fp8MlpParams& p) {
  MEGATON_ASSERT(fp8_mlp_supported(x, p), "fp8_mlp: not supported for these inputs");
#ifdef MEGATON_HAVE_CUDA
  auto [m1, o1] = main_grad_inputs(p.w1_main);
  auto [bm1, bo1] = main_grad_inputs(p.b1_main);
  auto [m2, o2] = main_grad_inputs(p.w2_main);
  auto [bm2, bo2] = main_grad_inputs(p.b2.defined() ? p.b2_main : MainGrad{});
  const torch::Tensor b2 = p.b2.defined() ? p.b2 : torch::empty({0}, p.w2.options());
  // Read here: autograd switches itself off inside the function's forward and backward.
  const bool record = torch::GradMode::is_enabled();
  return Fp8Mlp::apply(x, p.w1, p.b1, p.w2, b2, m1, o1, bm1, bo1, m2, o2, bm2, bo2, p.fc1, p.fc2, record);
#else
  return x;
#endif
}

}  // namespace megaton::ops::fp8
