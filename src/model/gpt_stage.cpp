#include "model/gpt_stage.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "model/positions.h"
#include "model/recompute.h"
#include "ops/embedding.h"
#include "ops/layer_norm.h"
#include "parallel/tensor/cross_entropy.h"
#include "parallel/tensor/lm_head_loss.h"
#include "parallel/tensor/mappings.h"

namespace megaton::model {

using parallel::InitSpec;

namespace {
const char* kWordEmbedding = "embedding.word_embeddings.weight";

// labels [b, s] for a last-stage output [s, b, ..] (hidden states or logits).
void check_labels(const torch::Tensor& labels, const torch::Tensor& out) {
  MEGATON_CHECK(labels.dim() == 2 && labels.size(0) == out.size(1) && labels.size(1) == out.size(0), DataError,
                "labels must be [micro-batch, seq] = [", out.size(1), ", ", out.size(0), "], got ", labels.sizes());
}
}  // namespace

StagePart pipeline_stage_part(const GptConfig& c, int pp, int stage) {
  const std::vector<int> per_stage = partition_layers(c, pp);
  MEGATON_ASSERT(stage >= 0 && stage < pp, "pipeline stage ", stage, " of ", pp);
  StagePart part;
  for (int s = 0; s < stage; ++s) part.first_layer += per_stage[s];
  part.num_layers = per_stage[stage];
  part.first = stage == 0;
  part.last = stage == pp - 1;
  return part;
}

StagePart virtual_stage_part(const GptConfig& c, int pp, int stage, int chunk, int layers_per_chunk) {
  MEGATON_CHECK(layers_per_chunk > 0 && c.model.num_layers % (pp * layers_per_chunk) == 0, UsageError, "--num-layers (",
                c.model.num_layers, ") must be divisible by --pipeline-model-parallel-size x ",
                "--num-layers-per-virtual-pipeline-stage (", pp, " x ", layers_per_chunk, ")");
  const int chunks = c.model.num_layers / (pp * layers_per_chunk);
  MEGATON_ASSERT(stage >= 0 && stage < pp && chunk >= 0 && chunk < chunks, "model chunk ", chunk, " of stage ", stage);
  StagePart part;
  part.first_layer = (chunk * pp + stage) * layers_per_chunk;
  part.num_layers = layers_per_chunk;
  part.first = stage == 0 && chunk == 0;
  part.last = stage == pp - 1 && chunk == chunks - 1;
  return part;
}

GptStage::GptStage(GptConfig config, const dist::ProcessGroups& groups)
    : GptStage(config, groups, pipeline_stage_part(config, groups.grid.pp_size(), groups.coords.pp)) {}

GptStage::GptStage(GptConfig config, const dist::ProcessGroups& groups, StagePart part,
                   std::shared_ptr<parallel::RngTracker> rng)
    : c_(std::move(config)),
      tp_(groups.tp),
      tp_rank_(groups.tp->rank()),
      tp_size_(groups.tp->size()),
      rng_(rng ? std::move(rng)
               : std::make_shared<parallel::RngTracker>(c_.seed, groups.tp->rank(), groups.coords.pp, c_.device)) {
  const int pp = groups.grid.pp_size();
  validate_gpt_config(c_, tp_size_, pp);
  first_ = part.first;
  last_ = part.last;
  first_layer_ = part.first_layer;
  MEGATON_ASSERT(part.num_layers >= 0 && part.first_layer + part.num_layers <= c_.model.num_layers, "stage layers [",
                 part.first_layer, ", ", part.first_layer + part.num_layers, ") outside the model's ",
                 c_.model.num_layers);

  const auto& m = c_.model;
  const int64_t h = m.hidden_size, V = c_.padded_vocab_size;
  factory_ = std::make_unique<parallel::ParamFactory>(c_.seed, tp_rank_, tp_size_, c_.dtype, c_.device);
  auto& f = *factory_;
  if (c_.fp8.enabled()) f.set_fp8_table(std::make_shared<ops::fp8::ScalingTable>(c_.fp8, c_.device));
  const bool tied = !m.untie_embeddings_and_output_weights;
  const InitSpec emb_init =
      m.init_method_xavier_uniform ? InitSpec::xavier_uniform(V, h) : InitSpec::normal(m.init_method_std);

  // muP re-draws the embeddings N(0, std) whatever the init flags (their vocabulary or position dimension does not
  // grow with the width).
  const InitSpec word_init = m.mup                     ? InitSpec::normal(m.init_method_std)
                             : m.xavier_word_embedding ? InitSpec::xavier_uniform(V, h)
                                                       : emb_init;
  if (first_) {
    word_.emplace(f, kWordEmbedding, c_.vocab_size, V, h, word_init, tp_, tied && !last_);
    if (m.embed_layernorm) {
      // Under muP the fork re-draws every weight whose name lacks "layernorm": its embedding LayerNorm's gain
      // ("word_embeddings.norm.weight") starts N(0, std), not 1.
      emb_ln_w_ = f.make({"embedding.norm.weight",
                          {h},
                          -1,
                          {},
                          m.mup ? InitSpec::normal(m.init_method_std) : InitSpec::ones(),
                          0,
                          true});
      emb_ln_b_ = f.make({"embedding.norm.bias", {h}, -1, {}, InitSpec::zeros(), 0, true});
    }
    if (c_.position_type() == PositionType::kAbsolute)
      position_ = f.make({"embedding.position_embeddings.weight",
                          {m.max_position_embeddings, h},
                          -1,
                          {},
                          m.mup ? InitSpec::normal(m.init_method_std) : emb_init});
  }
  for (int i = 0; i < part.num_layers; ++i) {
    layer_params_.push_back(f.params().size());
    layers_.push_back(std::make_unique<TransformerLayer>(f, c_, first_layer_ + i, tp_));
  }
  layer_params_.push_back(f.params().size());
  if (last_) {
    final_ln_w_ = f.make({"final_layernorm.weight", {h}, -1, {}, InitSpec::ones(), 0, true});
    final_ln_b_ = f.make({"final_layernorm.bias", {h}, -1, {}, InitSpec::zeros(), 0, true});
    if (!tied) {
      output_weight_ = f.make({"output_layer.weight",
                               {V, h},
                               0,
                               {},
                               m.mup ? InitSpec::normal(m.init_method_std) : emb_init,
                               c_.vocab_size});
    } else if (first_) {
      output_weight_ = word_->weight;  // PP = 1: one tensor serves both ends
    } else {
      // The last stage's copy of the word embedding: same name, so the same values as the first stage's.
      output_weight_ = f.make({kWordEmbedding, {V, h}, 0, {}, word_init, c_.vocab_size, false, true, true});
    }
    const int64_t per = V / tp_size_, start = per * tp_rank_;
    valid_columns_ = std::clamp<int64_t>(c_.vocab_size - start, 0, per);
    if (valid_columns_ < per) padding_columns_ = (torch::arange(per, torch::kInt64) >= valid_columns_).to(c_.device);
  }
}

void GptStage::zero_grad() {
  for (auto& p : factory_->params()) p.param.mutable_grad() = torch::Tensor();
}

LayerContext GptStage::layer_context(int64_t s) {
  LayerContext ctx;
  ctx.training = training_;
  ctx.rng = rng_.get();
  const PositionType pos = c_.position_type();
  if (pos == PositionType::kAlibi) {
    if (!alibi_.defined() || alibi_.size(-1) < s) {
      const int local = c_.model.num_attention_heads / tp_size_;
      alibi_ = alibi_bias(c_.model.num_attention_heads, local * tp_rank_, local, s, c_.device);
    }
    ctx.alibi = alibi_;
    ctx.alibi_mask_cache = std::make_shared<torch::Tensor>();  // this forward's own
  } else if (pos == PositionType::kRotary) {
    if (!rotary_cos_.defined() || rotary_cos_.size(0) < s)
      std::tie(rotary_cos_, rotary_sin_) = rotary_tables(s, c_.model.kv_channels, c_.device);
    ctx.rotary_cos = rotary_cos_;
    ctx.rotary_sin = rotary_sin_;
  }
  return ctx;
}

torch::Tensor GptStage::embed(const torch::Tensor& ids, const torch::Tensor& position_ids) const {
  const auto& m = c_.model;
  MEGATON_CHECK(ids.dim() == 2 && !ids.is_floating_point(), DataError,
                "the first pipeline stage takes token ids [micro-batch, seq] of an integer type, got shape ",
                ids.sizes(), " of ", ids.scalar_type());
  if (ids.device().is_cpu() && ids.numel() > 0) {
    const int64_t lo = ids.min().item<int64_t>(), hi = ids.max().item<int64_t>();
    MEGATON_CHECK(lo >= 0 && hi < c_.vocab_size, DataError, "token id ", (lo < 0 ? lo : hi),
                  " is outside the vocabulary [0, ", c_.vocab_size, ") (wrong tokenizer for this data?)");
  }
  const int64_t s = ids.size(1);
  // Looked up in [s, b] order: the embeddings come out as [s, b, h] (no transposing copy of the hidden states
  // forward, nor of their gradient backward).
  torch::Tensor x = word_->forward(ids.to(torch::kInt64).t());  // [s, b, h]
  if (m.embed_layernorm) x = ops::layer_norm(x, emb_ln_w_, emb_ln_b_, m.layernorm_epsilon, c_.kernels.fused_layernorm);
  if (position_.defined()) {
    MEGATON_CHECK(s <= m.max_position_embeddings, DataError, "sequence length ", s,
                  " exceeds --max-position-embeddings (", m.max_position_embeddings, ")");
    torch::Tensor pos = position_ids.defined()
                            ? position_ids.to(torch::kInt64)
                            : torch::arange(s, torch::TensorOptions().dtype(torch::kInt64).device(ids.device()))
                                  .unsqueeze(0)
                                  .expand_as(ids);                           // [b, s]
    x = x + ops::embedding(position_, pos.t(), main_grads().of(position_));  // [s, b, h]
  }
  // Megatron casts the embeddings (before their dropout) to fp32 for an fp32 residual stream.
  if (m.fp32_residual_connection) x = x.to(torch::kFloat32);
  return x.contiguous();  // [s, b, h]
}

SplitHidden GptStage::run_layers(torch::Tensor h, const LayerContext& ctx) {
  const bool recompute = c_.model.checkpoint_activations && training_;
  if (!recompute) {  // each layer's output add happens in the next LayerNorm's kernel
    SplitHidden x{h, {}};
    for (size_t i = 0; i < layers_.size(); ++i) {
      before_use(layer_params_[i], layer_params_[i + 1]);
      x = layers_[i]->forward_split(x, ctx);
    }
    return x;
  }
  const int chunk = std::max(1, c_.model.checkpoint_num_layers);
  for (size_t begin = 0; begin < layers_.size(); begin += chunk) {
    const size_t end = std::min(layers_.size(), begin + chunk);
    before_use(layer_params_[begin], layer_params_[end]);
    HiddenFn fn = [this, begin, end, ctx](const torch::Tensor& x) {
      torch::Tensor y = x;
      for (size_t i = begin; i < end; ++i) y = layers_[i]->forward(y, ctx);
      return y;
    };
    h = checkpointed(fn, h, *rng_);
  }
  return {h, {}};
}

torch::Tensor GptStage::final_hidden(const torch::Tensor& input, const torch::Tensor& position_ids,
                                     const ops::Documents& documents) {
  torch::Tensor h;
  if (first_) {
    before_use(0, layer_params_.front());
    h = embed(input, position_ids);  // [s, b, h]
    if (training_ && c_.model.hidden_dropout > 0.0)
      h = parallel::dropout(h, c_.model.hidden_dropout, true, rng_->default_generator());
    if (c_.model.mup) h = h * c_.model.mup_input_mult;
  } else {
    MEGATON_CHECK(input.dim() == 3 && input.size(2) == c_.model.hidden_size, InternalError, "pipeline stage ",
                  first_layer_, "+ expects hidden states [s, b, ", c_.model.hidden_size, "], got ", input.sizes());
    h = input;
  }
  LayerContext ctx = layer_context(h.size(0));
  ctx.documents = documents;  // checked by ops::causal_attention
  const SplitHidden out = run_layers(h, ctx);
  if (!last_) return out.sum();  // [s, b, h] to the next pipeline stage
  before_use(layer_params_.back(), params().size());
  const bool fused = c_.kernels.fused_layernorm;
  const double eps = c_.model.layernorm_epsilon;
  const ops::LayerNormMainGrads mg{main_grads().of(final_ln_w_), main_grads().of(final_ln_b_)};
  const torch::Tensor y = split_layer_norm(out, final_ln_w_, final_ln_b_, eps, fused, mg).y;  // [s, b, h]
  return c_.model.mup ? y * mup_output_scale() : y;
}

torch::Tensor GptStage::forward(const torch::Tensor& input, const torch::Tensor& position_ids,
                                const ops::Documents& documents) {
  torch::Tensor h = final_hidden(input, position_ids, documents);
  if (!last_) return h;
  torch::Tensor logits = parallel::parallel_lm_logits(h, output_weight_, tp_);  // [s, b, V/tp]
  // Training logits only feed token_losses, whose cross-entropy treats the padding columns as -inf itself: masking
  // here too would cost a pass over [s, b, V/tp] each way.
  if (padding_columns_.defined() && !training_)
    logits = logits.masked_fill(padding_columns_, -std::numeric_limits<double>::infinity());
  return logits;
}

torch::Tensor GptStage::forward_losses(const torch::Tensor& input, const torch::Tensor& labels,
                                       const torch::Tensor& position_ids, const ops::Documents& documents) {
  MEGATON_ASSERT(last_, "forward_losses on a stage that is not the last");
  // Without autograd (evaluation) the gradient written over the logits would be a wasted pass.
  if (!c_.kernels.fused_lm_head_loss || !torch::GradMode::is_enabled())
    return token_losses(forward(input, position_ids, documents), labels);
  torch::Tensor h = final_hidden(input, position_ids, documents);  // [s, b, h]
  check_labels(labels, h);
  return parallel::lm_head_cross_entropy(parallel::copy_to_tp_region(h, tp_), output_weight_, labels.t(), tp_,
                                         valid_columns_, true, main_grads().of(output_weight_))
      .t();  // [b, s]
}

torch::Tensor GptStage::forward_cached(const torch::Tensor& input, KvCache& cache) {
  MEGATON_CHECK(!training_, InternalError, "forward_cached is for inference: call set_training(false) first");
  if (cache.layers.empty()) cache.layers.resize(layers_.size());
  MEGATON_ASSERT(cache.layers.size() == layers_.size(), "KV cache of ", cache.layers.size(), " layers for a stage of ",
                 layers_.size());
  const int64_t past = cache.length();
  const int64_t s = first_ ? input.size(1) : input.size(0);
  torch::Tensor h;
  if (first_) {
    MEGATON_CHECK(!position_.defined() || past + s <= c_.model.max_position_embeddings, DataError, "position ",
                  past + s - 1, " is beyond --max-position-embeddings (", c_.model.max_position_embeddings, ")");
    torch::Tensor pos =
        torch::arange(past, past + s, torch::TensorOptions().dtype(torch::kInt64).device(input.device()))
            .unsqueeze(0)
            .expand({input.size(0), s});  // [b, s]
    h = embed(input, pos);                // [s, b, h]
    if (c_.model.mup) h = h * c_.model.mup_input_mult;
  } else {
    MEGATON_CHECK(input.dim() == 3 && input.size(2) == c_.model.hidden_size, InternalError, "pipeline stage ",
                  first_layer_, "+ expects hidden states [s, b, ", c_.model.hidden_size, "], got ", input.sizes());
    h = input;
  }
  LayerContext ctx = layer_context(past + s);
  if (ctx.rotary_cos.defined()) {
    ctx.rotary_cos = ctx.rotary_cos.narrow(0, past, s);  // [s, 1, 1, d] of positions past..past+s-1
    ctx.rotary_sin = ctx.rotary_sin.narrow(0, past, s);
  }
  for (size_t i = 0; i < layers_.size(); ++i) h = layers_[i]->forward_cached(h, ctx, cache.layers[i]);
  if (!last_) return h;
  h = ops::layer_norm(h, final_ln_w_, final_ln_b_, c_.model.layernorm_epsilon, c_.kernels.fused_layernorm);
  if (c_.model.mup) h = h * mup_output_scale();
  torch::Tensor logits = parallel::parallel_lm_logits(h, output_weight_, tp_);  // [s, b, V/tp]
  if (padding_columns_.defined())
    logits = logits.masked_fill(padding_columns_, -std::numeric_limits<double>::infinity());
  return logits;
}

torch::Tensor GptStage::token_losses(const torch::Tensor& logits, const torch::Tensor& labels) const {
  MEGATON_ASSERT(last_, "token_losses on a stage that is not the last");
  check_labels(labels, logits);
  return parallel::vocab_parallel_cross_entropy(logits, labels.t(), tp_, valid_columns_).t();  // [b, s]
}

torch::Tensor GptStage::masked_mean(const torch::Tensor& losses, const torch::Tensor& loss_mask) {
  torch::Tensor mask = loss_mask.to(torch::kFloat32).reshape(-1);
  return (losses.reshape(-1) * mask).sum() / mask.sum();
}

torch::Tensor GptStage::gather_logits(const torch::Tensor& logits) const {
  return parallel::all_gather_last_dim(logits.detach(), *tp_);
}

void all_reduce_tied_embedding_grads(const parallel::ParamList& params, dist::Communicator& embedding_group) {
  if (embedding_group.size() == 1) return;
  for (const auto& p : params) {
    if (!p.tied_embedding) continue;
    torch::Tensor g = p.param.grad();
    MEGATON_ASSERT(g.defined(), "tied embedding ", p.name, " has no gradient to sum");
    torch::Tensor flat = g.contiguous();
    embedding_group.all_reduce(flat, dist::ReduceOp::kSum);
    if (!flat.is_same(g)) g.copy_(flat);
  }
}

}  // namespace megaton::model
