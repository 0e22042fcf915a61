#include "ops/fp8/fp8_linear.h"

#include <torch/csrc/autograd/custom_function.h>

#include <tuple>

#include "core/error.h"
#include "ops/fp8/fp8_gemm_steps.h"

namespace megaton::ops::fp8 {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

using steps::check_shapes;
using steps::scale_for;

// CPU: t's values as its FP8 cast in `slot` gives them back (fp32), the amax recorded.
torch::Tensor emulate_cast(ScalingTable& table, int slot, const torch::Tensor& t, bool record) {
  const torch::Tensor scale = scale_for(table, slot, t, record);
  if (table.options().delayed() && record) table.record_amax(slot, t.detach().abs().amax().to(torch::kFloat32));
  return quantize_dequantize(t, scale.item<float>(), table.format(slot));
}

struct Fp8Linear : torch::autograd::Function<Fp8Linear> {
  // b: [out] or an empty placeholder; main/overwrite, b_main/b_overwrite: ops/linear.h's main_grad_inputs.
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, torch::Tensor w, torch::Tensor b,
                               torch::Tensor main, torch::Tensor overwrite, torch::Tensor b_main,
                               torch::Tensor b_overwrite, Fp8LinearSlots slots, bool record, bool gelu) {
    ScalingTable& table = *slots.table;
    const bool fp8_wgrad = table.options().wgrad;
    const torch::Tensor x2 = x.reshape({-1, x.size(-1)}).contiguous();  // [T, in]
    check_shapes(x2, w);
    const bool has_b = b.numel() > 0;
    torch::Tensor y2;   // [T, out]
    torch::Tensor pre;  // gelu: the GELU's input x w^T + b [T, out]
    variable_list saved;
    if (x.is_cuda()) {
#ifdef MEGATON_HAVE_CUDA
      using steps::amax_cell;
      const Fp8Matrix qx = cast_to_fp8(x2, scale_for(table, slots.input, x2, record), table.format(slots.input),
                                       fp8_wgrad, amax_cell(table, slots.input, record));
      const Fp8Matrix qw = cast_to_fp8(w.contiguous(), scale_for(table, slots.weight, w, record),
                                       table.format(slots.weight), true, amax_cell(table, slots.weight, record));
      y2 = steps::forward_gemm(qx, qw, has_b ? b : torch::Tensor(), gelu, x2.scalar_type(), slots.memo.get(), pre);
      // For the backward: w^T [in, out] and x^T [in, T] (or x itself for a 16-bit weight gradient).
      saved = {qw.bytes_t, qw.scale_inv, fp8_wgrad ? qx.bytes_t : x2, qx.scale_inv};
#endif
    } else {
      const torch::Tensor xq = emulate_cast(table, slots.input, x2, record);  // [T, in] fp32
      const torch::Tensor wq = emulate_cast(table, slots.weight, w, record);  // [out, in] fp32
      y2 = torch::mm(xq, wq.t()).to(x.scalar_type());
      saved = {wq, torch::Tensor(), fp8_wgrad ? xq : x2, torch::Tensor()};
      if (has_b) y2.add_(b);
      if (gelu) {
        pre = y2;
        y2 = torch::gelu(pre, "tanh");
      }
    }
    saved.push_back(pre);
    ctx->save_for_backward(saved);
    ctx->saved_data["w_dtype"] = w.scalar_type();
    ctx->saved_data["has_b"] = has_b;
    ctx->saved_data["gelu"] = gelu;
    ctx->saved_data["main"] = main;
    ctx->saved_data["overwrite"] = overwrite;
    ctx->saved_data["b_main"] = b_main;
    ctx->saved_data["b_overwrite"] = b_overwrite;
    // The table outlives every backward of the layers registered in it (the model owns both).
    ctx->saved_data["table"] = reinterpret_cast<int64_t>(slots.table);
    ctx->saved_data["memo"] = reinterpret_cast<int64_t>(slots.memo.get());  // likewise the layer's memo
    ctx->saved_data["grad_slot"] = slots.grad_output;
    ctx->saved_data["record"] = record;
    std::vector<int64_t> y_shape = x.sizes().vec();
    y_shape.back() = w.size(0);
    return y2.view(y_shape);  // [.., out]
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list s = ctx->get_saved_variables();
    auto& table = *reinterpret_cast<ScalingTable*>(ctx->saved_data["table"].toInt());
    const int g_slot = static_cast<int>(ctx->saved_data["grad_slot"].toInt());
    const bool fp8_wgrad = table.options().wgrad;
    const bool record = ctx->saved_data["record"].toBool();
    const torch::Tensor& dy = grads[0];                              // [.., out]
    torch::Tensor dy2 = dy.reshape({-1, dy.size(-1)}).contiguous();  // [T, out]
    const MainGrad main = ops::saved_main_grad(ctx, "main", "overwrite");
    const MainGrad b_main = saved_main_grad(ctx, "b_main", "b_overwrite");
    const bool gelu = ctx->saved_data["gelu"].toBool();
    const bool db_wanted = ctx->saved_data["has_b"].toBool() && ctx->needs_input_grad(2);
    torch::Tensor db;       // [out], or undefined (none wanted, or it went into b_main)
    torch::Tensor dx2, dw;  // [T, in]; [out, in] when there is no main grad
    if (dy.is_cuda()) {
#ifdef MEGATON_HAVE_CUDA
      const torch::Tensor &w_t = s[0], &w_sinv = s[1], &x_saved = s[2], &x_sinv = s[3];
      auto* memo = reinterpret_cast<GemmAlgoMemo*>(ctx->saved_data["memo"].toInt());
      // dy's cast, the bias gradient and the GELU's derivative (in one kernel where it applies; else dy2 becomes
      // d_pre).
      const Fp8Matrix qg = steps::cast_output_grad(table, g_slot, record, fp8_wgrad, dy2, gelu ? s[4] : torch::Tensor(),
                                                   db_wanted, b_main, db);
      if (fp8_wgrad) {
        std::tie(dx2, dw) = steps::backward_gemms(qg, w_t, w_sinv, x_saved, x_sinv, dy.scalar_type(),
                                                  ctx->needs_input_grad(0), main, memo);
      } else {
        dx2 =
            steps::backward_gemms(qg, w_t, w_sinv, {}, {}, dy.scalar_type(), ctx->needs_input_grad(0), {}, memo).first;
        dw = weight_grad(dy2, x_saved, main);
      }
#endif
    } else {
      const torch::Tensor &wq = s[0], &x_saved = s[2];
      steps::bias_and_gelu_grad(dy2, gelu ? s[4] : torch::Tensor(), db_wanted, b_main, db);
      const torch::Tensor gq = emulate_cast(table, g_slot, dy2, record);  // [T, out] fp32
      if (ctx->needs_input_grad(0)) dx2 = torch::mm(gq, wq).to(dy.scalar_type());
      if (fp8_wgrad) {
        const torch::Tensor prod = torch::mm(gq.t(), x_saved);  // [out, in] fp32
        if (!main.defined())
          dw = prod;
        else if (consume_overwrite(main))
          main.grad.copy_(prod);
        else
          main.grad.add_(prod);
      } else {
        dw = weight_grad(dy2, x_saved, main);
      }
    }
    const auto w_dtype = ctx->saved_data["w_dtype"].toScalarType();
    std::vector<int64_t> x_shape = dy.sizes().vec();
    if (dx2.defined()) x_shape.back() = dx2.size(1);
    const torch::Tensor none;
    return {dx2.defined() ? dx2.view(x_shape) : none,
            dw.defined() && ctx->needs_input_grad(1) ? dw.to(w_dtype) : none,
            db_wanted ? db : none,
            none,
            none,
            none,
            none,
            none,
            none,
            none};
  }
};

torch::Tensor or_empty(const torch::Tensor& t, const torch::TensorOptions& o) {
  return t.defined() ? t : torch::empty({0}, o);
}

torch::Tensor apply_fp8_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                               const MainGrad& main_grad, const Fp8LinearSlots& slots, const MainGrad& bias_main_grad,
                               bool gelu) {
  MEGATON_ASSERT(slots.defined(), "fp8_linear without scaling slots");
  auto [main, overwrite] = main_grad_inputs(main_grad);
  auto [b_main, b_overwrite] = main_grad_inputs(b.defined() ? bias_main_grad : MainGrad{});
  // Read here: autograd switches itself off inside the function's forward and backward.
  const bool record = torch::GradMode::is_enabled();
  return Fp8Linear::apply(x, w, or_empty(b, w.options()), main, overwrite, b_main, b_overwrite, slots, record, gelu);
}

}  // namespace

Fp8LinearSlots register_fp8_linear(ScalingTable& table, const std::string& name) {
  const Fp8Options& o = table.options();
  Fp8LinearSlots s;
  s.table = &table;
  s.input = table.slot(name + ":input", o.forward_format());
  s.weight = table.slot(name + ":weight", o.forward_format());
  s.grad_output = table.slot(name + ":grad_output", o.backward_format());
  s.memo = std::make_shared<GemmAlgoMemo>();
  return s;
}

torch::Tensor fp8_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                         const MainGrad& main_grad, const Fp8LinearSlots& slots, const MainGrad& bias_main_grad) {
  return apply_fp8_linear(x, w, b, main_grad, slots, bias_main_grad, false);
}

torch::Tensor fp8_linear_gelu(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                              const MainGrad& main_grad, const Fp8LinearSlots& slots, const MainGrad& bias_main_grad) {
  MEGATON_ASSERT(b.defined(), "fp8_linear_gelu without a bias");
  return apply_fp8_linear(x, w, b, main_grad, slots, bias_main_grad, true);
}

}  // namespace megaton::ops::fp8
