// One pipeline stage of Megatron's GPT, its tensors split over the TP group:
//   first stage: word embeddings (vocab-parallel) [+ LayerNorm with --embed-layernorm] [+ learned positions]
//                -> transpose to [s, b, h] -> embedding dropout
//   every stage: its transformer layers (global indices [first_layer, first_layer + num_layers)), optionally
//                recomputed in backward (--checkpoint-activations, chunks of --checkpoint-num-layers)
//   last stage:  final LayerNorm -> logits against the word embedding (tied; with PP > 1 the last stage holds its
//                own copy, initialised identically, whose gradient is summed over the embedding group) or an untied
//                output layer -> vocabulary-parallel cross-entropy.
// Logits of padding rows (ids >= vocab_size) are -inf (in training mode the loss treats them as -inf and forward()
// leaves them unmasked): padding never takes probability mass, so the model is the same whatever the padding (which
// depends on TP), and padding rows stay zero.
#pragma once
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "dist/process_groups.h"
#include "model/gpt_config.h"
#include "model/transformer_layer.h"
#include "parallel/param_info.h"
#include "parallel/rng_tracker.h"
#include "parallel/tensor/layers.h"

namespace megaton::model {

/// Generation's KV cache: every layer's keys/values of this stage for the positions fed so far.
struct KvCache {
  std::vector<LayerKv> layers;  // one per layer of the stage
  int64_t length() const { return layers.empty() ? 0 : layers.front().length(); }
  void clear() { layers.clear(); }
};

/// The part of the model one GptStage holds: global layers [first_layer, first_layer + num_layers), the embedding
/// when `first`, the final LayerNorm and output layer (+ loss) when `last`.
struct StagePart {
  int first_layer = 0;
  int num_layers = 0;
  bool first = true;
  bool last = true;
};

/// Stage `stage` of a `pp`-stage pipeline without interleaving (layers split by --pp-partition-method).
StagePart pipeline_stage_part(const GptConfig& c, int pp, int stage);
/// Model chunk `chunk` of stage `stage` in the interleaved schedule (--num-layers-per-virtual-pipeline-stage
/// `layers_per_chunk`): virtual stage chunk * pp + stage, global layers [(chunk * pp + stage) * n, + n); the embedding
/// on chunk 0 of stage 0, the output layer on the last chunk of stage pp - 1.
StagePart virtual_stage_part(const GptConfig& c, int pp, int stage, int chunk, int layers_per_chunk);

class GptStage {
 public:
  /// Builds this rank's shard of stage groups.coords.pp. Collective over nothing (init is local and deterministic).
  GptStage(GptConfig config, const dist::ProcessGroups& groups);
  /// Builds this rank's TP shard of `part` (a pipeline stage, or one model chunk of the interleaved schedule).
  /// Parameters keep their canonical global names, so every layout initialises and checkpoints identically. The
  /// model chunks of one rank share one dropout RNG tracker (`rng`; a new one, seeded for this pipeline rank, when
  /// null), as Megatron's chunks share the rank's CUDA RNG tracker.
  GptStage(GptConfig config, const dist::ProcessGroups& groups, StagePart part,
           std::shared_ptr<parallel::RngTracker> rng = nullptr);
  GptStage(const GptStage&) = delete;
  GptStage& operator=(const GptStage&) = delete;

  /// First stage: token ids [b, s] (int64); other stages: hidden [s, b, h] from the previous stage.
  /// Returns hidden [s, b, h] on all but the last stage, logits [s, b, padded_vocab/tp] on the last one.
  /// position_ids [b, s] (read by learned absolute positions only, as in Megatron: rotary and ALiBi ignore them;
  /// default 0..s-1), first stage. documents: --reset-attention-mask's, every stage (each document attends only to
  /// itself, causally); none: causal over the sample.
  torch::Tensor forward(const torch::Tensor& input, const torch::Tensor& position_ids = {},
                        const ops::Documents& documents = {});

  /// Incremental forward for generation (no dropout; call set_training(false) first): like forward(), but the input
  /// holds positions [cache.length(), cache.length() + s) (first stage: ids [b, s]; others: hidden [s, b, h]) and
  /// every layer's keys/values are appended to `cache`. Feeding a sequence in pieces gives forward()'s result.
  torch::Tensor forward_cached(const torch::Tensor& input, KvCache& cache);

  /// Last stage: per-token loss [b, s] fp32 from logits [s, b, V/tp] and labels [b, s].
  torch::Tensor token_losses(const torch::Tensor& logits, const torch::Tensor& labels) const;
  /// Last stage, training: token_losses(forward(input, position_ids), labels) in one; unless --no-fused-lm-head-loss,
  /// through parallel::lm_head_cross_entropy (the logits' gradient computed in the forward pass into the logits'
  /// buffer).
  torch::Tensor forward_losses(const torch::Tensor& input, const torch::Tensor& labels,
                               const torch::Tensor& position_ids = {}, const ops::Documents& documents = {});
  /// sum(losses * mask) / sum(mask): Megatron's loss_func. losses, mask [b, s].
  static torch::Tensor masked_mean(const torch::Tensor& losses, const torch::Tensor& loss_mask);
  /// The full logits [s, b, padded_vocab] gathered over TP (for generation and tests).
  torch::Tensor gather_logits(const torch::Tensor& logits) const;

  /// Every parameter shard of this stage, canonical names with global layer numbers.
  const parallel::ParamList& params() const { return factory_->params(); }
  /// The table through which the linear layers find their weights' fp32 main grads (gradient accumulation fusion):
  /// the trainer binds DataParallel's buffers to it.
  parallel::MainGrads& main_grads() const { return *factory_->main_grads(); }
  /// Sets every parameter's .grad to undefined.
  void zero_grad();
  /// The FP8 scaling state of this stage's linear layers (--fp8-format), or null.
  ops::fp8::ScalingTable* fp8_table() const { return factory_->fp8_table(); }
  /// forward() and forward_losses() call `fn(begin, end)` just before they first read params() [begin, end): the
  /// embedding's, each layer's (each recomputed chunk's with --checkpoint-activations), the final LayerNorm's and
  /// output layer's. The overlapped ZeRO-1 parameter all-gather waits there (DataParallel::wait_param_gather).
  using BeforeUse = std::function<void(size_t begin, size_t end)>;
  void set_before_use(BeforeUse fn) { before_use_ = std::move(fn); }

  void set_training(bool on) { training_ = on; }
  bool training() const { return training_; }
  bool is_first_stage() const { return first_; }
  bool is_last_stage() const { return last_; }
  int first_layer() const { return first_layer_; }
  int num_layers() const { return static_cast<int>(layers_.size()); }
  const GptConfig& config() const { return c_; }
  parallel::RngTracker& rng() { return *rng_; }
  const std::shared_ptr<parallel::RngTracker>& shared_rng() const { return rng_; }

 private:
  /// muP's factor on the final LayerNorm's output: mup_output_mult / hidden_size (the fork divides by the hidden size
  /// itself, not by a width multiplier).
  double mup_output_scale() const { return c_.model.mup_output_mult / double(c_.model.hidden_size); }
  torch::Tensor embed(const torch::Tensor& ids, const torch::Tensor& position_ids) const;  // -> [s, b, h]
  // forward() up to the logits: hidden [s, b, h] after the final LayerNorm on the last stage, else to the next stage.
  torch::Tensor final_hidden(const torch::Tensor& input, const torch::Tensor& position_ids,
                             const ops::Documents& documents);
  SplitHidden run_layers(torch::Tensor h, const LayerContext& ctx);
  LayerContext layer_context(int64_t s);
  void before_use(size_t begin, size_t end) const {
    if (before_use_ && begin < end) before_use_(begin, end);
  }

  GptConfig c_;
  dist::CommunicatorPtr tp_;
  int tp_rank_ = 0, tp_size_ = 1;
  bool first_ = true, last_ = true, training_ = true;
  int first_layer_ = 0;
  std::unique_ptr<parallel::ParamFactory> factory_;
  std::shared_ptr<parallel::RngTracker> rng_;

  std::optional<parallel::VocabParallelEmbedding> word_;  // first stage
  torch::Tensor position_;                                // [max_pos, h], absolute positions, first stage
  torch::Tensor emb_ln_w_, emb_ln_b_;                     // [h], --embed-layernorm, first stage
  std::vector<std::unique_ptr<TransformerLayer>> layers_;
  std::vector<size_t> layer_params_;  // [layers + 1]: layer i's parameters are params() [layer_params_[i], [i + 1])
  BeforeUse before_use_;
  torch::Tensor final_ln_w_, final_ln_b_;  // [h], last stage
  torch::Tensor output_weight_;            // [V/tp, h], last stage (tied or untied)
  torch::Tensor padding_columns_;          // [V/tp] bool: columns >= vocab_size, or undefined
  int64_t valid_columns_ = 0;              // columns of this rank's slice below vocab_size (last stage)

  // Cached position tables (rebuilt when a longer sequence arrives).
  torch::Tensor alibi_, rotary_cos_, rotary_sin_;
};

/// Sums the gradients of the tied word embedding over the embedding group (first and last stage), as Megatron's
/// _allreduce_embedding_grads; a no-op when the group has one rank (PP = 1) or the embeddings are untied.
void all_reduce_tied_embedding_grads(const parallel::ParamList& params, dist::Communicator& embedding_group);

}  // namespace megaton::model
