// One pre-LayerNorm transformer layer as Megatron's ParallelTransformerLayer builds it, with its heads and MLP
// columns split over TP:
//   a = x + dropout(Attention(LN1(x)))      (residual from LN1(x) with --apply-residual-connection-post-layernorm)
//   y = a + dropout(MLP(LN2(a)))
// Attention: fused QKV (column-parallel, canonical [heads, 3, head_dim, h]) -> rotary on q, k (if rotary) ->
// causal softmax attention (+ ALiBi bias) -> output projection (row-parallel). MLP: fc1 (column-parallel; 2*ffn
// wide for GLU, canonical [2, ffn, h]) -> activation -> fc2 (row-parallel). Output projections (attention dense,
// fc2) use the scaled init std / sqrt(2 * num_layers).
#pragma once
#include <torch/torch.h>

#include <memory>
#include <optional>

#include "dist/communicator.h"
#include "model/gpt_config.h"
#include "ops/attention.h"
#include "ops/gemm_epilogue.h"
#include "ops/layer_norm.h"
#include "parallel/param_factory.h"
#include "parallel/rng_tracker.h"
#include "parallel/tensor/layers.h"

namespace megaton::model {

/// Per-forward inputs shared by all layers of a stage.
struct LayerContext {
  bool training = false;
  parallel::RngTracker* rng = nullptr;
  torch::Tensor alibi;  // [heads/tp, 1, s] fp32, or undefined
  /// The fused attention's ALiBi mask, made by the first layer of this forward for the others (ops::AttentionOptions).
  std::shared_ptr<torch::Tensor> alibi_mask_cache;
  torch::Tensor rotary_cos;  // [s, 1, 1, head_dim] fp32, or undefined
  torch::Tensor rotary_sin;
  ops::Documents documents;  // --reset-attention-mask's (one forward's, its mask shared by the layers), or none: causal
};

/// A residual stream left as two addends: the hidden state is residual + dropout(delta) (delta undefined: residual
/// alone; dropout.p == 0: delta itself). Layers hand the sum on unformed so that the next LayerNorm adds it in its
/// kernel (ops::add_layer_norm), where the hidden dropout on delta is drawn too (unless --no-dropout-layernorm-fusion).
struct SplitHidden {
  torch::Tensor residual, delta;  // [s, b, h] each
  ops::HiddenDropout dropout;     // Megatron's hidden dropout on delta, not yet drawn
  /// residual + dropout(delta), as one tensor.
  torch::Tensor sum() const;
};

/// (sum, LayerNorm(sum)) of the hidden state `in`: its add (and its pending dropout) inside the LayerNorm's kernel
/// where ops::add_layer_norm fuses them.
ops::AddLayerNorm split_layer_norm(const SplitHidden& in, const torch::Tensor& weight, const torch::Tensor& bias,
                                   double eps, bool use_fused, const ops::LayerNormMainGrads& main_grads);

/// One layer's keys and values of the positions seen so far (generation's KV cache), after rotary.
struct LayerKv {
  torch::Tensor k, v;  // [s_past, b, heads/tp, d]; undefined before the first step
  int64_t length() const { return k.defined() ? k.size(0) : 0; }
};

class TransformerLayer {
 public:
  /// `index`: global layer index (0-based) used in parameter names; Megatron's layer_number is index + 1.
  TransformerLayer(parallel::ParamFactory& f, const GptConfig& c, int index, dist::CommunicatorPtr tp);

  /// x [s, b, h] -> [s, b, h].
  torch::Tensor forward(const torch::Tensor& x, const LayerContext& ctx) const;

  /// The same with the input and the output as two addends each: the input's add runs inside LN1's kernel and the
  /// output's final residual add is left to the next LayerNorm (the previous layer's output add, one kernel forward
  /// and one gradient add backward per layer, disappears). forward(x) == forward_split({x, {}}).sum().
  SplitHidden forward_split(const SplitHidden& x, const LayerContext& ctx) const;

  /// Incremental forward for generation: x [s, b, h] holds positions [past, past + s), past = kv.length(); this
  /// step's keys/values are appended to `kv` and the queries attend over all past + s keys (causally). ctx.rotary_*
  /// must hold the rows of positions [past, past + s); ctx.alibi at least past + s keys. Same math as forward().
  torch::Tensor forward_cached(const torch::Tensor& x, const LayerContext& ctx, LayerKv& kv) const;

  int index() const { return index_; }

 private:
  // [s, b, h] -> [s, b, h]; with kv: appends to it and attends over the cached keys too.
  torch::Tensor attention(const torch::Tensor& x, const LayerContext& ctx, LayerKv* kv = nullptr) const;
  SplitHidden forward_impl(const SplitHidden& x, const LayerContext& ctx, LayerKv* kv) const;
  torch::Tensor mlp(const torch::Tensor& x) const;  // [s, b, h] -> [s, b, h]
  /// A LayerNorm's weight and bias main grads (undefined until DataParallel binds them; ops/layer_norm.h).
  ops::LayerNormMainGrads ln_main_grads(const torch::Tensor& w, const torch::Tensor& b) const;

  GptConfig c_;
  int index_;
  int64_t local_heads_;
  ops::Activation act_;
  bool bias_gelu_mlp_ = false;  // tanh-GELU MLP: one autograd function, ops::bias_gelu_mlp (when fc1 has a bias)
  bool use_varlen_ = true;      // documents through the variable-length kernel; --no-varlen-attention clears it
  bool alibi_fold_ = true;      // ALiBi folded into the heads where it applies; --no-alibi-fold clears it
  bool fuse_qkv_grad_ = true;   // QKV gradient and bias gradient in one pass (ops::split_qkv); --no-qkv-grad-fusion
  ops::MlpEpilogues mlp_epilogues_;  // cuBLASLt epilogues (--no-gemm-epilogue-fusion, --no-gemm-dgelu-epilogue)
  std::unique_ptr<ops::GemmAlgoMemo> gemm_algos_ = std::make_unique<ops::GemmAlgoMemo>();  // mlp_epilogues_.memo
  torch::Tensor ln1_w_, ln1_b_, ln2_w_, ln2_b_;                                            // [h]
  parallel::MainGradsPtr main_grads_;                  // the chunk's (gradient accumulation fusion)
  std::optional<parallel::ColumnParallelLinear> qkv_;  // [3h/tp, h] = canonical [heads/tp, 3, d, h]
  std::optional<parallel::RowParallelLinear> dense_;   // [h, h/tp]
  std::optional<parallel::ColumnParallelLinear> fc1_;  // [f/tp, h] or GLU [2f/tp, h] = canonical [2, f/tp, h]
  std::optional<parallel::RowParallelLinear> fc2_;     // [h, f/tp]
};

/// The init of weight matrices: normal(std) or xavier-uniform on the global fans; `scaled` divides the normal std
/// by sqrt(2 * num_layers) (Megatron's scaled_init_method_normal for output projections). With --mup: normal(std /
/// sqrt(mup_width_mult)), whatever the other flags.
parallel::InitSpec weight_init(const GptOptions& m, int64_t fan_in, int64_t fan_out, bool scaled,
                               double mup_width_mult = 1.0);

}  // namespace megaton::model
