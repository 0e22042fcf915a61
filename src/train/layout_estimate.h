// Arithmetic about a training configuration that needs no allocation: parameter counts per pipeline stage,
// Megatron's model-FLOPs per iteration, and an estimate of memory per GPU. Used by `megaton train --dry-run`,
// the iteration log (model-TFLOP/s) and `megaton plan`.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/gpt_options.h"
#include "ops/kernel_options.h"
#include "optim/precision_options.h"
#include "parallel/parallel_options.h"

namespace megaton::train {

struct ParamCounts {
  int64_t embedding = 0;   // word (padded vocab) + learned positions (+ embedding LayerNorm)
  int64_t per_layer = 0;   // one transformer layer
  int64_t final_norm = 0;  // final LayerNorm
  int64_t total = 0;       // the whole model, tied embedding counted once
};

ParamCounts count_parameters(const model::GptOptions& m, int64_t padded_vocab);

/// Layers of each pipeline stage: uniform split, the remainder going to the earliest stages.
std::vector<int> layers_per_stage(int num_layers, int pp);

/// Megatron's model FLOPs of one iteration without recomputation: 72 B s l h^2 (1 + s/6h + V/12lh).
double model_flops_per_iteration(const model::GptOptions& m, int64_t padded_vocab, int64_t global_batch);

/// Whether a GPU run of `m` (validated: kv_channels set) in bf16/fp16 (`half_precision`) folds ALiBi into the heads,
/// as ops::uses_alibi_fold decides (ALiBi, the fused attention, alibi_fold, ops::alibi_fold_fits; LibTorch >= 2.1,
/// which the GPU builds have). --reset-attention-mask's documents (not known here) keep the mask.
bool alibi_folds(const model::GptOptions& m, const ops::KernelOptions& k, bool half_precision, bool fp16);

struct MemoryEstimate {
  int64_t params_on_rank = 0;  // parameters held by the busiest rank (first stage, with the embedding)
  double weights_gib = 0;      // model weights in the training dtype
  double grads_gib = 0;        // fp32 gradient accumulation buffers
  double optimizer_gib = 0;    // fp32 master weights + Adam moments (divided by DP under ZeRO-1)
  double activations_gib = 0;  // stashed activations of the in-flight micro-batches
  double total_gib() const { return weights_gib + grads_gib + optimizer_gib + activations_gib; }
};

/// The busiest rank's memory for `micro_batch` samples per micro-batch and `num_micro_batches` per iteration.
/// eight_bit_moments: --use-bnb-optimizer's 8-bit Adam states.
MemoryEstimate estimate_memory(const model::GptOptions& m, const ops::KernelOptions& k,
                               const parallel::ParallelOptions& p, int micro_batch, int num_micro_batches,
                               const optim::PrecisionOptions& prec, int64_t padded_vocab,
                               bool eight_bit_moments = false);

struct TrainConfig;
/// The multi-line report printed by --dry-run.
std::string describe_layout(const TrainConfig& c, int64_t vocab, int64_t padded_vocab);

}  // namespace megaton::train
