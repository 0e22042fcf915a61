#include "ops/gemm_epilogue.h"

#include <torch/csrc/autograd/custom_function.h>

#include <tuple>
#include <utility>

#include "ops/cublaslt_gemm.h"
#include "ops/gelu_bias_grad.h"
#include "ops/linear.h"

namespace megaton::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// [.., n] -> [rows, n], contiguous.
torch::Tensor rows_of(const torch::Tensor& t) {
  return t.reshape({-1, t.size(-1)}).contiguous();
}

// act = gelu(pre), pre = x w^T + b. x [T, in], w [out, in], b [out]. epilogue: try cuBLASLt's GELU_AUX_BIAS.
std::tuple<torch::Tensor, torch::Tensor> linear_gelu(const torch::Tensor& x, const torch::Tensor& w,
                                                     const torch::Tensor& b, bool epilogue, GemmAlgoMemo* memo) {
#ifdef MEGATON_HAVE_CUDA
  if (epilogue && gemm_epilogue_supported({x, w, b})) {
    torch::Tensor act = torch::empty({x.size(0), w.size(0)}, x.options()), pre = torch::empty_like(act);
    if (lt::linear_gelu_aux(x, w, b.contiguous(), act, pre, memo)) return {act, pre};
  }
#else
  (void)epilogue, (void)memo;
#endif
  torch::Tensor pre = torch::linear(x, w, b);
  return {torch::gelu(pre, "tanh"), pre};
}

// d_pre = (dy w2) * gelu'(pre) [T, f] and fc1's bias gradient db1 [f]. dgelu: try cuBLASLt's DGELU epilogue (the
// derivative applied to the fp32 product) + the column-sum kernel; else the GEMM, then one kernel for both.
// db1_main: fc1's bias's main grad, where the column sums may go (ops::bias_grad; db1 then undefined).
std::pair<torch::Tensor, torch::Tensor> input_grad_through_gelu(const torch::Tensor& dy, const torch::Tensor& w2,
                                                                const torch::Tensor& pre, bool dgelu,
                                                                const MainGrad& db1_main, GemmAlgoMemo* memo) {
#ifdef MEGATON_HAVE_CUDA
  if (dgelu && gemm_epilogue_supported({dy, w2, pre})) {
    torch::Tensor d_pre = torch::empty_like(pre);  // [T, f]
    if (lt::linear_dgelu(dy, w2, pre, d_pre, memo)) return {d_pre, bias_grad(d_pre, db1_main)};
  }
#else
  (void)dgelu, (void)memo;
#endif
  return gelu_backward_bias_grad(torch::mm(dy, w2), pre, db1_main);
}

// The memo travels through autograd's saved data as an integer (an IValue holds no raw pointer); 0: none.
int64_t memo_handle(GemmAlgoMemo* memo) {
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(memo));
}
GemmAlgoMemo* memo_of(int64_t handle) {
  return reinterpret_cast<GemmAlgoMemo*>(static_cast<intptr_t>(handle));
}

struct BiasGeluMlp : torch::autograd::Function<BiasGeluMlp> {
  // x [T, h] contiguous, w1 [f, h], b1 [f], w2 [h, f], b2 [h] or (no fc2 bias) an empty placeholder -> [T, h]. The
  // placeholder: autograd functions take no undefined tensors.
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, torch::Tensor w1, torch::Tensor b1,
                               torch::Tensor w2, torch::Tensor b2, bool epilogue, bool dgelu, torch::Tensor main1,
                               torch::Tensor overwrite1, torch::Tensor main2, torch::Tensor overwrite2,
                               torch::Tensor b_main1, torch::Tensor b_overwrite1, torch::Tensor b_main2,
                               torch::Tensor b_overwrite2, int64_t memo) {
    torch::Tensor w1c = w1.contiguous(), w2c = w2.contiguous();
    auto [act, pre] = linear_gelu(x, w1c, b1, epilogue, memo_of(memo));  // [T, f] each
    ctx->save_for_backward({x, w1c, w2c, act, pre});
    const bool has_b2 = b2.numel() > 0;
    ctx->saved_data["has_b2"] = has_b2;
    ctx->saved_data["dgelu"] = dgelu;
    ctx->saved_data["memo"] = memo;
    // The weights' fp32 main grads (gradient accumulation fusion), or empty: the weight gradients are returned.
    ctx->saved_data["main1"] = main1;
    ctx->saved_data["overwrite1"] = overwrite1;
    ctx->saved_data["main2"] = main2;
    ctx->saved_data["overwrite2"] = overwrite2;
    ctx->saved_data["b_main1"] = b_main1;  // the biases' main grads, likewise
    ctx->saved_data["b_overwrite1"] = b_overwrite1;
    ctx->saved_data["b_main2"] = b_main2;
    ctx->saved_data["b_overwrite2"] = b_overwrite2;
    return torch::linear(act, w2c, has_b2 ? b2 : torch::Tensor());  // [T, h]
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &w1 = saved[1], &w2 = saved[2], &act = saved[3], &pre = saved[4];
    torch::Tensor dy = grads[0].contiguous();  // [T, h]
    // ATen's GEMMs (on the H200 the DGELU_BGRAD epilogue ran 1.9x slower than mm + gelu_backward + sum, BGRADB 2-4%
    // slower than mm + sum); GELU backward and fc1's bias gradient in one pass (ops/gelu_bias_grad.h), or the
    // derivative in fc2's input-gradient GEMM (DGELU) and the bias gradient after.
    torch::Tensor dw2 =
        weight_grad(dy, act, saved_main_grad(ctx, "main2", "overwrite2"));  // [h, f], or into the main grad
    torch::Tensor db2 = ctx->saved_data["has_b2"].toBool()
                            ? bias_grad(dy, saved_main_grad(ctx, "b_main2", "b_overwrite2"))
                            : torch::Tensor();  // [h], or into its main grad
    auto [d_pre, db1] = input_grad_through_gelu(dy, w2, pre, ctx->saved_data["dgelu"].toBool(),
                                                saved_main_grad(ctx, "b_main1", "b_overwrite1"),
                                                memo_of(ctx->saved_data["memo"].toInt()));
    torch::Tensor dw1 = weight_grad(d_pre, x, saved_main_grad(ctx, "main1", "overwrite1"));  // [f, h] (or into it)
    torch::Tensor dx = ctx->needs_input_grad(0) ? torch::mm(d_pre, w1) : torch::Tensor();
    const torch::Tensor none;
    return {dx, dw1, db1, dw2, db2, none, none, none, none, none, none, none, none, none, none, none};
  }
};

}  // namespace

bool gemm_epilogue_supported(std::initializer_list<torch::Tensor> tensors) {
#ifdef MEGATON_HAVE_CUDA
  const torch::Tensor* first = nullptr;
  for (const torch::Tensor& t : tensors) {
    if (!t.defined()) continue;
    if (!t.is_cuda() || t.dim() < 1 || t.numel() == 0 || t.size(-1) % 8 != 0) return false;
    if (t.scalar_type() != torch::kBFloat16 && t.scalar_type() != torch::kFloat16) return false;
    if (first != nullptr && (t.scalar_type() != first->scalar_type() || t.device() != first->device())) return false;
    if (first == nullptr) first = &t;
  }
  return first != nullptr;
#else
  (void)tensors;
  return false;
#endif
}

torch::Tensor bias_gelu_mlp(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& b1,
                            const torch::Tensor& w2, const torch::Tensor& b2, MlpEpilogues epilogues,
                            const MainGrad& w1_main_grad, const MainGrad& w2_main_grad, const MainGrad& b1_main_grad,
                            const MainGrad& b2_main_grad) {
  const torch::Tensor b2_or_empty = b2.defined() ? b2 : torch::empty({0}, w2.options());
  auto [main1, overwrite1] = main_grad_inputs(w1_main_grad);
  auto [main2, overwrite2] = main_grad_inputs(w2_main_grad);
  auto [b_main1, b_overwrite1] = main_grad_inputs(b1_main_grad);
  auto [b_main2, b_overwrite2] = main_grad_inputs(b2.defined() ? b2_main_grad : MainGrad{});
  return BiasGeluMlp::apply(rows_of(x), w1, b1, w2, b2_or_empty, epilogues.forward, epilogues.backward, main1,
                            overwrite1, main2, overwrite2, b_main1, b_overwrite1, b_main2, b_overwrite2,
                            memo_handle(epilogues.memo))
      .view(x.sizes());  // [.., h]
}

}  // namespace megaton::ops
