// The CUDA path of ops::layer_norm: kernels/layer_norm_kernels.cu behind a torch::autograd::Function, launched on the
// current CUDA stream of x's device. The forward saves x, weight, mean and rstd (as ATen's native_layer_norm does);
// the backward reads x and dy once and reduces dgamma/dbeta from per-block partials.
#include "ops/layer_norm_cuda.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>

#include "core/error.h"
#include "core/kernel_float_type.h"
#include "layer_norm_kernels.h"        // kernels/
#include "layer_norm_mixed_kernels.h"  // kernels/
#include "ops/aligned.h"
#include "ops/philox_seed_cuda.h"

namespace megaton::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

kernels::FloatType float_type(const torch::Tensor& t) {
  return kernel_float_type(t, "fused layer norm");
}

cudaStream_t stream_of(const torch::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}

// The autograd functions carry the main grads as four extra inputs (empty placeholders for undefined ones).
void save_main_grads(AutogradContext* ctx, const torch::Tensor& wg, const torch::Tensor& wo, const torch::Tensor& bg,
                     const torch::Tensor& bo) {
  ctx->saved_data["w_main"] = wg;
  ctx->saved_data["w_overwrite"] = wo;
  ctx->saved_data["b_main"] = bg;
  ctx->saved_data["b_overwrite"] = bo;
}

LayerNormMainGrads saved_main_grads(AutogradContext* ctx) {
  return {saved_main_grad(ctx, "w_main", "w_overwrite"), saved_main_grad(ctx, "b_main", "b_overwrite")};
}

struct FusedLayerNorm : torch::autograd::Function<FusedLayerNorm> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, torch::Tensor weight, torch::Tensor bias,
                               double eps, torch::Tensor wg, torch::Tensor wo, torch::Tensor bg, torch::Tensor bo) {
    torch::Tensor xc = aligned_contiguous(x), w = aligned_contiguous(weight);
    FusedLayerNormOutput out = fused_layer_norm_forward(xc, w, bias, eps);
    ctx->save_for_backward({xc, w, out.mean, out.rstd});
    save_main_grads(ctx, wg, wo, bg, bo);
    return out.y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    FusedLayerNormGrads g =
        fused_layer_norm_backward(grads[0], saved[0], saved[1], saved[2], saved[3], {}, saved_main_grads(ctx));
    const torch::Tensor none;
    return {g.dx, g.dweight, g.dbias, none, none, none, none, none};
  }
};

// (sum, y) = (x + residual, LayerNorm(x + residual)): one forward kernel, one backward kernel. With dropout (p > 0):
// x is dropped out inside the forward kernel, and the backward kernel writes x's gradient through the same keep bits
// beside the residual's; with an fp32 residual and a 16-bit x (mixed) it writes x's 16-bit gradient beside it too.
struct FusedAddLayerNorm : torch::autograd::Function<FusedAddLayerNorm> {
  static variable_list forward(AutogradContext* ctx, torch::Tensor x, torch::Tensor residual, torch::Tensor weight,
                               torch::Tensor bias, double eps, HiddenDropout dropout, torch::Tensor wg,
                               torch::Tensor wo, torch::Tensor bg, torch::Tensor bo) {
    torch::Tensor w = aligned_contiguous(weight);
    FusedLayerNormOutput out = fused_layer_norm_forward(x, w, bias, eps, residual, dropout);
    ctx->save_for_backward({out.sum, w, out.mean, out.rstd, out.keep});
    ctx->saved_data["dropout_p"] = dropout.p;
    save_main_grads(ctx, wg, wo, bg, bo);
    return {out.sum, out.y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const double p = ctx->saved_data["dropout_p"].toDouble();
    // grads[0]: of sum (the residual stream), grads[1]: of y; both materialised (zeros when unused).
    FusedLayerNormGrads g = fused_layer_norm_backward(grads[1], saved[0], saved[1], saved[2], saved[3], grads[0],
                                                      saved_main_grads(ctx), saved[4], p);
    const torch::Tensor none;
    return {g.dx_branch.defined() ? g.dx_branch : g.dx, g.dx, g.dweight, g.dbias, none, none, none, none, none, none};
  }
};

// The residual's dtype the fused add takes beside x: x's own, or fp32 with a 16-bit x of the weight's dtype (mixed:
// an fp32 residual stream in a 16-bit model).
bool residual_type_fits(const torch::Tensor& x, const torch::Tensor& residual, const torch::Tensor& weight) {
  const auto dtype = x.scalar_type();
  return residual.scalar_type() == dtype ||
         (residual.scalar_type() == torch::kFloat32 && dtype != torch::kFloat32 && weight.scalar_type() == dtype);
}

}  // namespace

bool fused_add_layer_norm_supported(const torch::Tensor& x, const torch::Tensor& residual, const torch::Tensor& weight,
                                    const torch::Tensor& bias) {
  return fused_layer_norm_supported(x, weight, bias) && residual.defined() && residual.sizes() == x.sizes() &&
         residual_type_fits(x, residual, weight) && residual.device() == x.device() &&
         (!residual.is_contiguous() || aligned16(residual));
}

bool fused_dropout_add_layer_norm_supported(const torch::Tensor& x, const HiddenDropout& dropout) {
  const auto dtype = x.scalar_type();
  return dropout.p > 0.0 && dropout.p < 1.0 && dropout.generator != nullptr && dropout.generator->defined() &&
         dropout.generator->device().is_cuda() && dropout.generator->device().index() == x.device().index() &&
         (dtype == torch::kBFloat16 || dtype == torch::kFloat16);
}

FusedAddLayerNormOutput fused_add_layer_norm(const torch::Tensor& x, const torch::Tensor& residual,
                                             const torch::Tensor& weight, const torch::Tensor& bias, double eps,
                                             const LayerNormMainGrads& main_grads, const HiddenDropout& dropout) {
  MEGATON_ASSERT(fused_add_layer_norm_supported(x, residual, weight, bias),
                 "fused add + layer norm: unsupported input ", x.sizes(), " + ", residual.sizes(), " ",
                 c10::toString(x.scalar_type()), " on ", x.device());
  // The dropout's own requirements are checked by fused_layer_norm_forward, which draws it.
  auto [wg, wo] = main_grad_inputs(main_grads.weight);
  auto [bg, bo] = main_grad_inputs(main_grads.bias);
  variable_list out = FusedAddLayerNorm::apply(x, residual, weight, bias, eps, dropout, wg, wo, bg, bo);
  return {out[0], out[1]};  // x's shape (contiguous)
}

bool fused_layer_norm_supported(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (!x.defined() || !weight.defined() || !bias.defined() || !x.is_cuda() || x.dim() < 1 || x.numel() == 0)
    return false;
  const auto dtype = x.scalar_type();
  if (dtype != torch::kFloat32 && dtype != torch::kBFloat16 && dtype != torch::kFloat16) return false;
  // weight and bias of x's type, or 16-bit ones of one type for an fp32 x (mixed: an fp32 residual stream)
  const auto wtype = weight.scalar_type();
  if (wtype != dtype && !(dtype == torch::kFloat32 && (wtype == torch::kBFloat16 || wtype == torch::kFloat16)))
    return false;
  const int64_t h = x.size(-1);
  for (const torch::Tensor* p : {&weight, &bias})
    if (p->scalar_type() != wtype || p->device() != x.device() || p->dim() != 1 || p->size(0) != h) return false;
  if (!kernels::layer_norm_supported_width(h)) return false;
  return !x.is_contiguous() || aligned16(x);  // a misaligned contiguous view: ATen rather than a copy
}

torch::Tensor fused_layer_norm(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                               double eps, const LayerNormMainGrads& main_grads) {
  MEGATON_ASSERT(fused_layer_norm_supported(x, weight, bias), "fused layer norm: unsupported input ", x.sizes(), " ",
                 c10::toString(x.scalar_type()), " on ", x.device(), " with weight ", weight.sizes(), " ",
                 c10::toString(weight.scalar_type()));
  auto [wg, wo] = main_grad_inputs(main_grads.weight);
  auto [bg, bo] = main_grad_inputs(main_grads.bias);
  return FusedLayerNorm::apply(x, weight, bias, eps, wg, wo, bg, bo);
}

FusedLayerNormOutput fused_layer_norm_forward(const torch::Tensor& x_in, const torch::Tensor& weight,
                                              const torch::Tensor& bias, double eps, const torch::Tensor& residual,
                                              const HiddenDropout& dropout) {
  MEGATON_ASSERT(fused_layer_norm_supported(x_in, weight, bias), "fused layer norm: unsupported input ", x_in.sizes(),
                 " ", c10::toString(x_in.scalar_type()), " on ", x_in.device());
  MEGATON_ASSERT(!residual.defined() || (residual.sizes() == x_in.sizes() && residual.device() == x_in.device() &&
                                         residual_type_fits(x_in, residual, weight)),
                 "fused add + layer norm: residual ", residual.sizes(), " ",
                 residual.defined() ? c10::toString(residual.scalar_type()) : "", " does not match x ", x_in.sizes(),
                 " ", c10::toString(x_in.scalar_type()));
  // An fp32 residual stream in a 16-bit model: kernels/layer_norm_mixed_kernels.h.
  const bool mixed = weight.scalar_type() != (residual.defined() ? residual : x_in).scalar_type();
  const c10::cuda::CUDAGuard guard(x_in.device());
  torch::Tensor x = aligned_contiguous(x_in);                                             // [rows, h] in memory
  torch::Tensor w = aligned_contiguous(weight), b = aligned_contiguous(bias);             // [h]
  torch::Tensor r = residual.defined() ? aligned_contiguous(residual) : torch::Tensor();  // [rows, h] in memory
  const int64_t h = x.size(-1), rows = x.numel() / h;
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(x.device());
  FusedLayerNormOutput out{torch::empty_like(x, w.options()) /* contiguous as x, in the weight's type */,
                           torch::empty({rows}, f32), torch::empty({rows}, f32),
                           r.defined() ? torch::empty_like(r) : torch::Tensor(), torch::Tensor()};
  kernels::ResidualDropout drop;
  if (dropout.p > 0.0) {
    MEGATON_ASSERT(r.defined() && fused_dropout_add_layer_norm_supported(x, dropout), "fused layer norm: dropout ",
                   dropout.p, " needs a residual, bf16/fp16 and a CUDA generator");
    out.keep = torch::empty({rows * h / 8}, torch::TensorOptions().dtype(torch::kUInt8).device(x.device()));
    drop.p = static_cast<float>(dropout.p);
    drop.philox = philox_seed(*dropout.generator, kernels::kResidualDropoutPhiloxIncrement);
    drop.keep = out.keep.data_ptr<uint8_t>();
  }
  if (mixed) {
    kernels::layer_norm_mixed_forward(
        x.data_ptr(), w.data_ptr(), b.data_ptr(), out.y.data_ptr(), out.mean.data_ptr<float>(),
        out.rstd.data_ptr<float>(), float_type(w), rows, h, static_cast<float>(eps), stream_of(x),
        r.defined() ? r.data_ptr<float>() : nullptr, r.defined() ? out.sum.data_ptr<float>() : nullptr, {}, drop);
    return out;
  }
  kernels::layer_norm_forward(x.data_ptr(), w.data_ptr(), b.data_ptr(), out.y.data_ptr(), out.mean.data_ptr<float>(),
                              out.rstd.data_ptr<float>(), float_type(x), rows, h, static_cast<float>(eps), stream_of(x),
                              r.defined() ? r.data_ptr() : nullptr, r.defined() ? out.sum.data_ptr() : nullptr, {},
                              drop);
  return out;
}

FusedLayerNormGrads fused_layer_norm_backward(const torch::Tensor& dy_in, const torch::Tensor& x_in,
                                              const torch::Tensor& weight, const torch::Tensor& mean,
                                              const torch::Tensor& rstd, const torch::Tensor& dresidual_in,
                                              const LayerNormMainGrads& main_grads, const torch::Tensor& keep,
                                              double dropout_p) {
  const int64_t h = x_in.size(-1), rows = x_in.numel() / h;
  // An fp32 x (the residual stream) with a 16-bit weight: kernels/layer_norm_mixed_kernels.h; dy of the weight's type.
  const bool mixed = x_in.scalar_type() == torch::kFloat32 && weight.scalar_type() != torch::kFloat32;
  MEGATON_ASSERT(dy_in.sizes() == x_in.sizes() && dy_in.scalar_type() == weight.scalar_type() &&
                     (mixed || weight.scalar_type() == x_in.scalar_type()) && weight.numel() == h &&
                     mean.scalar_type() == torch::kFloat32 && rstd.scalar_type() == torch::kFloat32 &&
                     mean.numel() == rows && rstd.numel() == rows && mean.is_contiguous() && rstd.is_contiguous(),
                 "fused layer norm backward: dy ", dy_in.sizes(), " ", c10::toString(dy_in.scalar_type()), ", x ",
                 x_in.sizes(), " ", c10::toString(x_in.scalar_type()), ", weight ", weight.sizes(), ", mean ",
                 mean.sizes(), ", rstd ", rstd.sizes(), " do not match");
  const c10::cuda::CUDAGuard guard(x_in.device());
  torch::Tensor x = aligned_contiguous(x_in), dy = aligned_contiguous(dy_in);  // [rows, h] in memory
  torch::Tensor w = aligned_contiguous(weight);                                // [h]
  torch::Tensor dres;                                                          // [rows, h] in memory, or none
  if (dresidual_in.defined()) {
    MEGATON_ASSERT(dresidual_in.sizes() == x_in.sizes() && dresidual_in.scalar_type() == x_in.scalar_type(),
                   "fused layer norm backward: residual gradient ", dresidual_in.sizes(), " does not match x ",
                   x_in.sizes());
    dres = aligned_contiguous(dresidual_in);
  }
  const kernels::FloatType type = float_type(w);
  FusedLayerNormGrads g;
  kernels::ResidualDropoutGrad drop;
  if (dropout_p > 0.0) {
    MEGATON_ASSERT(keep.defined() && keep.scalar_type() == torch::kUInt8 && keep.is_contiguous() &&
                       keep.numel() == rows * h / 8 && keep.device() == x.device(),
                   "fused layer norm backward: keep bits ", keep.sizes(), " do not match x ", x_in.sizes());
    MEGATON_ASSERT(!mixed || dres.defined(), "fused layer norm backward: a mixed-type dropout without its residual");
    g.dx_branch = torch::empty_like(x, w.options());
    drop.p = static_cast<float>(dropout_p);
    drop.keep = keep.data_ptr<uint8_t>();
    drop.dx_dropout = g.dx_branch.data_ptr();
  } else if (mixed && dres.defined()) {
    g.dx_branch = torch::empty_like(x, w.options());  // the 16-bit branch's gradient, round(dx)
  }
  const int64_t partials = mixed ? kernels::layer_norm_mixed_backward_partials(type, rows, h, {}, dropout_p > 0.0)
                                 : kernels::layer_norm_backward_partials(type, rows, h, {}, dropout_p > 0.0);
  torch::Tensor workspace =
      torch::empty({2, partials, h}, torch::TensorOptions().dtype(torch::kFloat32).device(x.device()));
  g.dx = torch::empty_like(x);  // contiguous as x
  // dgamma / dbeta [h]: returned in the weight's dtype, or summed into their fp32 main grads
  const kernels::ColumnSumOut dw_out = column_sum_out(main_grads.weight, h, w.options(), g.dweight),
                              db_out = column_sum_out(main_grads.bias, h, w.options(), g.dbias);
  if (mixed) {
    const kernels::MixedBranchGrad branch{g.dx_branch.defined() ? g.dx_branch.data_ptr() : nullptr, drop.p, drop.keep};
    kernels::layer_norm_mixed_backward(dy.data_ptr(), x.data_ptr<float>(), w.data_ptr(), mean.data_ptr<float>(),
                                       rstd.data_ptr<float>(), g.dx.data_ptr<float>(), dw_out, db_out,
                                       workspace.data_ptr<float>(), partials, type, rows, h, stream_of(x),
                                       dres.defined() ? dres.data_ptr<float>() : nullptr, branch);
    return g;
  }
  kernels::layer_norm_backward(dy.data_ptr(), x.data_ptr(), w.data_ptr(), mean.data_ptr<float>(),
                               rstd.data_ptr<float>(), g.dx.data_ptr(), dw_out, db_out, workspace.data_ptr<float>(),
                               partials, type, rows, h, stream_of(x), dres.defined() ? dres.data_ptr() : nullptr, {},
                               drop);
  return g;
}

}  // namespace megaton::ops
