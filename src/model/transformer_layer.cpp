#include "model/transformer_layer.h"

#include <array>
#include <cmath>

#include "core/error.h"
#include "model/positions.h"
#include "ops/attention.h"
#include "ops/dropout.h"
#include "ops/fp8/fp8_mlp.h"
#include "ops/gemm_epilogue.h"
#include "ops/layer_norm.h"
#include "ops/qkv_split.h"
#include "parallel/tensor/mappings.h"

namespace megaton::model {

using parallel::InitSpec;

namespace {

// Causal attention of s new queries over S = past + s keys (query i sits at position past + i): the explicit path of
// ops::causal_attention_explicit with the causal mask shifted by `past`. q [s, b, np, d], k, v [S, b, np, d].
// ALiBi's bias is added as the training forward on this device adds it: exactly (in fp32, with the scores in fp32)
// where a forward over the S positions would fold it into the heads (ops::uses_alibi_fold), else rounded to q's dtype
// in Megatron's baddbmm.
torch::Tensor cached_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const ops::AttentionOptions& o) {
  const int64_t s = q.size(0), b = q.size(1), np = q.size(2), d = q.size(3), S = k.size(0), past = S - s;
  const double coeff = o.layer_scale;
  const double norm_factor = std::sqrt(double(d)) * coeff;
  torch::Tensor q2 = q.reshape({s, b * np, d}).transpose(0, 1);     // [b*np, s, d]
  torch::Tensor k2 = k.reshape({S, b * np, d}).permute({1, 2, 0});  // [b*np, d, S]
  torch::Tensor scores;                                             // [b*np, s, S]
  if (ops::uses_alibi_fold(k, o)) {
    const torch::Tensor bias = o.alibi.narrow(-1, 0, S).repeat({b, 1, 1});  // [b*np, 1, S] fp32
    scores = torch::baddbmm(bias, q2.to(torch::kFloat32), k2.to(torch::kFloat32), /*beta=*/1.0 / coeff,
                            /*alpha=*/1.0 / norm_factor);  // fp32: (q k / sqrt(d) + bias) / coeff
  } else if (o.alibi.defined()) {
    torch::Tensor bias = o.alibi.to(q.scalar_type()).narrow(-1, 0, S).repeat({b, 1, 1}).expand({b * np, s, S});
    scores = torch::baddbmm(bias, q2, k2, /*beta=*/1.0 / coeff, /*alpha=*/1.0 / norm_factor);
  } else {
    scores = torch::bmm(q2, k2) * (1.0 / norm_factor);
  }
  scores = scores.view({b, np, s, S});
  const bool half = q.scalar_type() == torch::kBFloat16 || q.scalar_type() == torch::kFloat16;
  torch::Tensor x = half ? scores.to(torch::kFloat32) : scores;
  if (coeff != 1.0) x = x * coeff;
  torch::Tensor future =
      torch::ones({s, S}, torch::TensorOptions().dtype(torch::kBool).device(q.device())).triu(past + 1);  // [s, S]
  x = x.masked_fill(future, -10000.0);
  torch::Tensor probs = torch::softmax(x, -1).to(q.scalar_type());               // [b, np, s, S]
  torch::Tensor v2 = v.reshape({S, b * np, d}).transpose(0, 1);                  // [b*np, S, d]
  torch::Tensor ctx = torch::bmm(probs.view({b * np, s, S}), v2);                // [b*np, s, d]
  return ctx.view({b, np, s, d}).permute({2, 0, 1, 3}).reshape({s, b, np * d});  // [s, b, np*d]
}

}  // namespace

InitSpec weight_init(const GptOptions& m, int64_t fan_in, int64_t fan_out, bool scaled, double mup_width_mult) {
  // muP (the fork's mup_init_with_param_name): every weight N(0, std), through mup.init.normal_'s 1/sqrt(width) where
  // both dimensions grow with the width; no 1/sqrt(2 L) for the output projections.
  if (m.mup) return InitSpec::normal(m.init_method_std / std::sqrt(mup_width_mult));
  if (m.init_method_xavier_uniform) return InitSpec::xavier_uniform(fan_in, fan_out);
  return InitSpec::normal(scaled ? m.init_method_std / std::sqrt(2.0 * m.num_layers) : m.init_method_std);
}

TransformerLayer::TransformerLayer(parallel::ParamFactory& f, const GptConfig& c, int index, dist::CommunicatorPtr tp)
    : c_(c), index_(index), act_(c.activation()), main_grads_(f.main_grads()) {
  const auto& m = c.model;
  const int64_t h = m.hidden_size, heads = m.num_attention_heads, d = m.kv_channels, ffn = m.ffn_hidden_size;
  const int n = tp->size();
  local_heads_ = heads / n;
  bias_gelu_mlp_ = act_ == ops::Activation::kGeluTanh && !c_.fp8.enabled();  // FP8: fc1 and fc2 run fp8_linear
  const ops::KernelOptions& k = c.kernels;
  fuse_qkv_grad_ = k.qkv_grad_fusion;
  use_varlen_ = k.varlen_attention;
  alibi_fold_ = k.alibi_fold;
  // where supported, else ATen
  mlp_epilogues_ = {k.gemm_epilogue, k.gemm_epilogue && k.gemm_dgelu_epilogue, gemm_algos_.get()};
  const std::string p = "layers." + std::to_string(index) + ".";
  auto ln = [&](const std::string& name, bool weight) {
    return f.make({p + name, {h}, -1, {}, weight ? InitSpec::ones() : InitSpec::zeros(), 0, true});
  };
  ln1_w_ = ln("input_layernorm.weight", true);
  ln1_b_ = ln("input_layernorm.bias", false);

  parallel::ColumnParallelOptions qkv;
  qkv.in = h;
  qkv.out = 3 * heads * d;
  // muP: the fan-in width multipliers of the four weights (both of whose dimensions grow with the width).
  const double w_h = m.mup ? m.mup_width_mult_hidden() : 1.0, w_ffn = m.mup ? m.mup_width_mult_ffn() : 1.0;
  qkv.init = weight_init(m, h, 3 * heads * d, false, w_h);
  qkv.weight_lr_scale = 1.0 / w_h;
  qkv.canonical_shape = {heads, 3, d, h};
  qkv.partition_dim = 0;
  qkv_.emplace(f, p + "attention.qkv", qkv, tp);

  parallel::RowParallelOptions dense;
  dense.in = heads * d;
  dense.out = h;
  dense.init = weight_init(m, heads * d, h, true, w_h);
  dense.weight_lr_scale = 1.0 / w_h;
  dense_.emplace(f, p + "attention.dense", dense, tp);

  ln2_w_ = ln("post_attention_layernorm.weight", true);
  ln2_b_ = ln("post_attention_layernorm.bias", false);

  const bool glu = ops::is_glu(act_);
  parallel::ColumnParallelOptions fc1;
  fc1.in = h;
  fc1.out = (glu ? 2 : 1) * ffn;
  fc1.init = weight_init(m, h, fc1.out, false, w_h);
  fc1.weight_lr_scale = 1.0 / w_h;
  if (glu) {
    fc1.canonical_shape = {2, ffn, h};
    fc1.partition_dim = 1;
  }
  fc1_.emplace(f, p + "mlp.fc1", fc1, tp);

  parallel::RowParallelOptions fc2;
  fc2.in = ffn;
  fc2.out = h;
  fc2.init = weight_init(m, ffn, h, true, w_ffn);
  fc2.weight_lr_scale = 1.0 / w_ffn;
  fc2_.emplace(f, p + "mlp.fc2", fc2, tp);
}

torch::Tensor TransformerLayer::attention(const torch::Tensor& x, const LayerContext& ctx, LayerKv* kv) const {
  const auto& m = c_.model;
  const int64_t s = x.size(0), b = x.size(1), d = m.kv_channels;
  // [s, b, np, 3, d] -> q, k, v [s, b, np, d]. Both ways the backward writes the three gradients into one [s, b, np,
  // 3, d] tensor (not three zero-filled ones summed): by default ops::split_qkv, which also gives the bias (added here
  // without its gradient) its gradient in the same pass; with --no-qkv-grad-fusion unbind's stack, the bias gradient
  // then a column sum in the linear's backward.
  std::array<torch::Tensor, 3> parts;
  if (fuse_qkv_grad_) {
    parts = ops::split_qkv(qkv_->forward_bias_grad_elsewhere(x).view({s, b, local_heads_, 3, d}), qkv_->bias,
                           qkv_->bias_main_grad());
  } else {
    const std::vector<torch::Tensor> unbound = qkv_->forward(x).view({s, b, local_heads_, 3, d}).unbind(3);
    parts = {unbound[0], unbound[1], unbound[2]};
  }
  torch::Tensor q = parts[0], k = parts[1], v = parts[2];  // [s, b, np, d]
  if (ctx.rotary_cos.defined()) {
    q = apply_rotary(q, ctx.rotary_cos, ctx.rotary_sin);
    k = apply_rotary(k, ctx.rotary_cos, ctx.rotary_sin);
  }
  // muP scores q k * mup_attn_mult / d where every attention path scales by 1/sqrt(d): q carries the rest.
  if (m.mup) q = q * (m.mup_attn_mult / std::sqrt(double(d)));
  ops::AttentionOptions o;
  o.layer_scale = m.apply_query_key_layer_scaling ? double(index_ + 1) : 1.0;
  o.softmax_in_fp32 = m.attention_softmax_in_fp32 || m.apply_query_key_layer_scaling;
  o.dropout_p = m.attention_dropout;
  o.training = ctx.training;
  o.dropout_generator = ctx.rng ? &ctx.rng->tp_generator() : nullptr;
  o.alibi = ctx.alibi;
  o.alibi_mask_cache = ctx.alibi_mask_cache;
  o.documents = ctx.documents;
  o.use_fused = c_.use_fused_attention && c_.kernels.masked_softmax_fusion;
  o.use_varlen = use_varlen_;
  o.alibi_fold = alibi_fold_;
  if (kv != nullptr) {
    MEGATON_CHECK(!ctx.training && !o.documents.defined(), InternalError,
                  "the KV-cache path is for inference only, with the causal mask");
    kv->k = kv->k.defined() ? torch::cat({kv->k, k}, 0) : k.contiguous();  // [past + s, b, np, d]
    kv->v = kv->v.defined() ? torch::cat({kv->v, v}, 0) : v.contiguous();
    return dense_->forward(cached_attention(q, kv->k, kv->v, o));  // [s, b, h]
  }
  torch::Tensor context = ops::causal_attention(q, k, v, o);  // [s, b, np*d]
  return dense_->forward(context);                            // [s, b, h]
}

ops::LayerNormMainGrads TransformerLayer::ln_main_grads(const torch::Tensor& w, const torch::Tensor& b) const {
  return {main_grads_->of(w), main_grads_->of(b)};
}

torch::Tensor TransformerLayer::mlp(const torch::Tensor& x) const {
  const parallel::ColumnParallelLinear& fc1 = *fc1_;
  const parallel::RowParallelLinear& fc2 = *fc2_;
  const dist::CommunicatorPtr& tp = fc2.tp();
  const bool one_rank = tp->size() == 1;
  // A fused MLP function `run` (x [s, b, h] -> [s, b, h], partial over TP, with fc2's bias only on one rank) between
  // the TP mappings of fc1 (column) and fc2 (row): fc2's bias added after the reduction.
  const auto between_tp_mappings = [&](const auto& run) {
    torch::Tensor y = run(parallel::copy_to_tp_region(x, tp));
    if (one_rank) return y;
    y = parallel::reduce_from_tp_region(y, tp);
    return fc2.bias.defined() ? y + fc2.bias : y;
  };
  const torch::Tensor b2 = one_rank ? fc2.bias : torch::Tensor();
  const ops::MainGrad b2_main = one_rank ? fc2.bias_main_grad() : ops::MainGrad{};
  if (bias_gelu_mlp_ && fc1.bias.defined()) {
    // Megatron's bias-GeLU fusion (GELU backward + fc1 bias gradient in one kernel; on CUDA bf16/fp16 fc1's forward
    // and fc2's input gradient times the GELU derivative in cuBLASLt epilogues unless --no-gemm-epilogue-fusion or
    // --no-gemm-dgelu-epilogue).
    return between_tp_mappings([&](const torch::Tensor& xp) {
      return ops::bias_gelu_mlp(xp, fc1.weight, fc1.bias, fc2.weight, b2, mlp_epilogues_, fc1.main_grad(),
                                fc2.main_grad(), fc1.bias_main_grad(), b2_main);
    });
  }
  if (act_ == ops::Activation::kGeluTanh && c_.fp8.enabled()) {
    // FP8 on a GPU: fc1's GEMM writes the GELU's output as FP8 for fc2 (ops/fp8/fp8_mlp.h).
    const ops::fp8::Fp8MlpParams p{
        fc1.weight, fc1.bias,        fc2.weight,     b2, fc1.main_grad(), fc1.bias_main_grad(), fc2.main_grad(),
        b2_main,    fc1.fp8_slots(), fc2.fp8_slots()};
    if (ops::fp8::fp8_mlp_supported(x, p))
      return between_tp_mappings([&](const torch::Tensor& xp) { return ops::fp8::fp8_mlp(xp, p); });
  }
  // (forward_gelu: under FP8, the GELU in fc1's GEMM epilogue)
  torch::Tensor inter = act_ == ops::Activation::kGeluTanh
                            ? fc1.forward_gelu(x)
                            : ops::apply_activation(fc1.forward(x), act_);  // [s, b, f/tp]
  return fc2.forward(inter);                                                // [s, b, h]
}

torch::Tensor TransformerLayer::forward(const torch::Tensor& x, const LayerContext& ctx) const {
  return forward_impl({x, {}}, ctx, nullptr).sum();
}

SplitHidden TransformerLayer::forward_split(const SplitHidden& x, const LayerContext& ctx) const {
  return forward_impl(x, ctx, nullptr);
}

torch::Tensor TransformerLayer::forward_cached(const torch::Tensor& x, const LayerContext& ctx, LayerKv& kv) const {
  return forward_impl({x, {}}, ctx, &kv).sum();
}

SplitHidden TransformerLayer::forward_impl(const SplitHidden& in, const LayerContext& ctx, LayerKv* kv) const {
  const auto& m = c_.model;
  const double eps = m.layernorm_epsilon;
  const bool fused_ln = c_.kernels.fused_layernorm;
  // Megatron's hidden dropout on the attention's and the MLP's outputs, drawn where they join the residual stream:
  // inside the next LayerNorm's add (ops::add_layer_norm; in its kernel unless --no-dropout-layernorm-fusion).
  ops::HiddenDropout hidden_dropout;
  if (ctx.training && m.hidden_dropout > 0.0) {
    MEGATON_ASSERT(ctx.rng != nullptr, "hidden dropout without a generator");
    hidden_dropout = {m.hidden_dropout, &ctx.rng->default_generator(), c_.kernels.dropout_layernorm_fusion};
  }
  // x = in.residual + dropout(in.delta), added inside LN1's kernel where the fused LayerNorm applies.
  const ops::AddLayerNorm x_ln1 = split_layer_norm(in, ln1_w_, ln1_b_, eps, fused_ln, ln_main_grads(ln1_w_, ln1_b_));
  const torch::Tensor &x = x_ln1.sum, &ln1 = x_ln1.y;  // [s, b, h] each
  torch::Tensor residual = m.apply_residual_connection_post_layernorm ? ln1 : x;
  // a = residual + dropout(attention); the add runs inside LN2's kernel where the fused LayerNorm applies.
  const ops::AddLayerNorm a_ln2 = ops::add_layer_norm(attention(ln1, ctx, kv), residual, ln2_w_, ln2_b_, eps, fused_ln,
                                                      ln_main_grads(ln2_w_, ln2_b_), hidden_dropout);
  const torch::Tensor &a = a_ln2.sum, &ln2 = a_ln2.y;  // [s, b, h] each
  residual = m.apply_residual_connection_post_layernorm ? ln2 : a;
  // the add (and the dropout) is the next LayerNorm's, or the caller's sum()
  return {residual, mlp(ln2), hidden_dropout};
}

torch::Tensor SplitHidden::sum() const {
  if (!delta.defined()) return residual;
  if (dropout.p <= 0.0) return residual + delta;
  MEGATON_ASSERT(dropout.generator != nullptr, "hidden dropout without a generator");
  return residual + ops::dropout(delta, dropout.p, *dropout.generator);
}

ops::AddLayerNorm split_layer_norm(const SplitHidden& in, const torch::Tensor& weight, const torch::Tensor& bias,
                                   double eps, bool use_fused, const ops::LayerNormMainGrads& main_grads) {
  if (!in.delta.defined()) return {in.residual, ops::layer_norm(in.residual, weight, bias, eps, use_fused, main_grads)};
  return ops::add_layer_norm(in.delta, in.residual, weight, bias, eps, use_fused, main_grads, in.dropout);
}

}  // namespace megaton::model
