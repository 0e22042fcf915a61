#include "ops/attention_varlen.h"

#include "core/error.h"
#include "core/torch_compat.h"
#include "ops/cudnn_varlen.h"

namespace megaton::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct VarlenAttention : public torch::autograd::Function<VarlenAttention> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& cu_seqlens, int64_t max_len,
                               double dropout_p, int64_t kernel) {
    const bool cudnn = VarlenKernel(kernel) == VarlenKernel::kCudnn;
    const compat::VarlenFlashOut f = cudnn ? cudnn_varlen::forward(q, k, v, cu_seqlens, max_len, dropout_p)
                                           : compat::varlen_flash_forward(q, k, v, cu_seqlens, max_len, dropout_p);
    ctx->save_for_backward({q, k, v, f.out});
    ctx->saved_data["logsumexp"] = f.logsumexp;  // fp32 statistics, in the kernel's own layout
    ctx->saved_data["rng_state"] = f.rng_state;  // flash: its rng state; cuDNN: the philox seed
    ctx->saved_data["unused"] = f.unused;        // cuDNN: the philox offset
    ctx->saved_data["cu_seqlens"] = cu_seqlens;
    ctx->saved_data["max_len"] = max_len;
    ctx->saved_data["dropout_p"] = dropout_p;
    ctx->saved_data["kernel"] = kernel;
    return f.out;  // [t, heads, d]
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const variable_list saved = ctx->get_saved_variables();
    compat::VarlenFlashOut f;
    f.out = saved[3];
    f.logsumexp = ctx->saved_data["logsumexp"].toTensor();
    f.rng_state = ctx->saved_data["rng_state"].toTensor();
    f.unused = ctx->saved_data["unused"].toTensor();
    const torch::Tensor cu = ctx->saved_data["cu_seqlens"].toTensor();
    const int64_t max_len = ctx->saved_data["max_len"].toInt();
    const double p = ctx->saved_data["dropout_p"].toDouble();
    const torch::Tensor dout = grad[0].contiguous();
    auto [dq, dk, dv] = VarlenKernel(ctx->saved_data["kernel"].toInt()) == VarlenKernel::kCudnn
                            ? cudnn_varlen::backward(dout, saved[0], saved[1], saved[2], f, cu, max_len, p)
                            : compat::varlen_flash_backward(dout, saved[0], saved[1], saved[2], f, cu, max_len, p);
    return {dq, dk, dv, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

VarlenKernel parse_varlen_kernel(const std::string& name) {
  if (name == "flash") return VarlenKernel::kFlash;
  MEGATON_CHECK(name == "cudnn", UsageError, "--varlen-attention-kernel: expected flash|cudnn, got '", name, "'");
  return VarlenKernel::kCudnn;
}

const char* varlen_kernel_name(VarlenKernel k) {
  return k == VarlenKernel::kCudnn ? "cudnn" : "flash";
}

bool varlen_kernel_available(VarlenKernel k) {
  return k == VarlenKernel::kCudnn ? cudnn_varlen::available() : compat::kHasVarlenFlash;
}

torch::Tensor varlen_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                      const torch::Tensor& cu_seqlens, int64_t max_len, double dropout_p,
                                      VarlenKernel kernel) {
  MEGATON_CHECK(q.dim() == 3 && k.sizes() == q.sizes() && v.sizes() == q.sizes() && q.stride(-1) == 1 &&
                    k.stride(-1) == 1 && v.stride(-1) == 1,
                InternalError, "varlen attention: expected q, k, v [t, heads, d] with unit last stride, got ",
                q.sizes(), " ", k.sizes(), " ", v.sizes());
  MEGATON_CHECK(cu_seqlens.scalar_type() == torch::kInt32 && cu_seqlens.dim() == 1 && cu_seqlens.size(0) >= 2 &&
                    cu_seqlens.device() == q.device() && max_len > 0,
                InternalError, "varlen attention: expected cu_seqlens [n + 1] int32 on ", q.device(), ", got ",
                cu_seqlens.scalar_type(), " ", cu_seqlens.sizes(), " on ", cu_seqlens.device(), ", max_len ", max_len);
  MEGATON_CHECK(varlen_kernel_available(kernel), InternalError, "varlen attention: the ", varlen_kernel_name(kernel),
                " kernel is not in LibTorch ", compat::torch_version());
  if (kernel == VarlenKernel::kCudnn)  // cuDNN's ragged offsets assume packed [t, heads, d] rows
    return VarlenAttention::apply(q.contiguous(), k.contiguous(), v.contiguous(), cu_seqlens, max_len, dropout_p,
                                  int64_t(kernel));
  return VarlenAttention::apply(q, k, v, cu_seqlens, max_len, dropout_p, int64_t(kernel));
}

}  // namespace megaton::ops
