// The explicit cost model of `megaton plan` (docs/plan.md): memory per GPU (train::estimate_memory) and the time of
// one iteration as a sum of named terms, for one model, one parallel layout and one cluster.
#pragma once
#include <cstdint>
#include <string>

#include "model/gpt_options.h"
#include "ops/kernel_options.h"
#include "plan/cluster.h"
#include "train/layout_estimate.h"

namespace megaton::plan {

/// What is trained: the model flags (Megatron's), the vocabulary, the global batch and the precision.
struct ModelSpec {
  model::GptOptions model;  // validated (GptOptions::validate): ffn and kv channels filled
  ops::KernelOptions kernels;
  int64_t vocab = 50257;     // tokenizer vocabulary, padded per TP (--vocab-size) ...
  int64_t padded_vocab = 0;  // ... or exactly this (--padded-vocab), when > 0
  int global_batch = 0;
  bool bf16 = true;
  bool fp16 = false;
  int zero_stage = 0;
  int64_t padded_vocab_for(int tp) const;
};

/// One candidate: how the world is cut and what each rank runs.
struct Layout {
  int tp = 1, pp = 1, dp = 1;
  int micro_batch = 1;
  bool recompute = false;
  int world() const { return tp * pp * dp; }
  int num_micro_batches(int global_batch) const { return global_batch / (micro_batch * dp); }
  std::string name() const;  // "TP2xPP4xDP8"
};

/// The fitted constants (plan/calibration.h fits them to measured iterations). The defaults are the fit (rounded) to
/// the seven single-H200 points of src/plan/calibration_h200.csv (docs/plan.md).
struct Calibration {
  double eff_max = 0.806;                   // GEMM efficiency (fraction of peak) approached by large per-GPU GEMMs
  double gemm_half_gflop = 6.17;            // per-GPU GEMM size (GFLOP of one MLP GEMM of a micro-batch) at eff_max / 2
  double layer_overhead_ms = 0.0378;        // fixed cost per layer and micro-batch on a rank (launches), fwd+bwd
  double optimizer_ns_per_param = 0.00709;  // per-parameter work of the step: Adam, grad zeroing, norm, casts
  double fixed_ms = 0.457;                  // per-iteration constant (loss, logging, scheduler)
  double elementwise_ps_per_element = 11.2;  // memory-bound work per activation element of a layer (LayerNorm, ...)
  double dp_overlap = 0.5;  // fraction of the DP gradient reduction (ZeRO-1's parameter all-gather) that can hide
                            // behind the last backward (the first forward)
  // Megatron's dropout, forward + backward, measured (not fitted: the sweeps run without dropout) on an H200
  // (docs/plan.md). ATen's fused hidden dropout (--no-dropout-layernorm-fusion, --no-fused-layernorm, fp32): 2.98 /
  // 2.96 ps per element of [s, b, h] (124M / 1.3B) in profiles. The default, drawn inside the LayerNorm kernels: what
  // the draws add to the plain kernels in BM_DropoutAddLayerNormKernels (forward + fused backward, 0.97 / 0.95 ps).
  // The attention's dropout inside cuDNN's flash kernels 1.59 / 1.94 ps per causal score element b (np/tp) s^2 / 2.
  double hidden_dropout_ps_per_element = 2.97;
  double hidden_dropout_fused_ps_per_element = 0.96;
  double attention_dropout_ps_per_element = 1.77;
  // ALiBi and --fp32-residual-connection, measured (not fitted) on an H100 (docs/plan.md): 30-iteration A/Bs against
  // the same model with learned positions / a 16-bit residual stream. ALiBi folded into the heads (the default in
  // bf16/fp16, train::alibi_folds), per causal score element b (np/tp) s^2 / 2 of a layer: 2.17 / 1.82 ps at 1.3B /
  // 124M. Through its 16-bit mask (--no-alibi-fold, fp32) the kernel computes the whole square: per causal score
  // element and head dimension, 0.0637 / 0.0776 ps (8.15 / 4.97 ps per score).
  // --fp32-residual-connection per [s, b, h] element of a layer: 6.71 / 5.96 ps.
  double alibi_fold_ps_per_element = 2.0;
  double alibi_mask_ps_per_element_dim = 0.071;
  double fp32_residual_ps_per_element = 6.3;
  std::string source = "built-in: fitted to src/plan/calibration_h200.csv";

  /// Achieved fraction of peak for a per-GPU GEMM of `gflop` GFLOP: eff_max * g / (g + gemm_half_gflop).
  double efficiency(double gemm_gflop) const;
};

/// Every term of one prediction, in milliseconds per iteration, and the memory estimate.
struct StepPrediction {
  Layout layout;
  train::MemoryEstimate memory;
  double usable_gib = 0;
  bool fits = false;
  int num_micro_batches = 0;
  double model_flops = 0;     // Megatron's formula for the global batch, no recomputation
  double hardware_flops = 0;  // x 4/3 with recomputation
  double gemm_gflop = 0;      // the per-GPU GEMM size the efficiency is read at
  double efficiency = 0;
  double compute_ms = 0;        // hardware FLOPs per GPU / (efficiency x peak)
  double overhead_ms = 0;       // layer_overhead_ms x layers per stage x micro-batches
  double elementwise_ms = 0;    // elementwise_ps_per_element x s b (h + f/TP) x layers per stage x micro-batches
  double dropout_ms = 0;        // hidden (2 s b h a layer) and attention (b np/TP s^2 / 2 a layer) dropout, when on
  double alibi_ms = 0;          // ALiBi's bias over b np/TP s^2 / 2 scores a layer (folded or masked), when on
  bool alibi_folded = false;    // the ALiBi constant: the fold's (else the mask's)
  double fp32_residual_ms = 0;  // --fp32-residual-connection's wider stream, s b h a layer
  bool hidden_dropout_in_kernels = false;  // the hidden dropout's constant: the LayerNorm kernels' (else ATen's)
  double bubble_ms = 0;       // (PP - 1) / M x (compute + overhead + elementwise + dropout + ALiBi + fp32 stream + TP)
  double tp_comm_ms = 0;      // TP all-reduces of [s, b, h] per layer over the intra-node link
  double pp_p2p_ms = 0;       // activations and their gradients between stages
  double dp_comm_ms = 0;      // exposed part of the DP gradient all-reduce / reduce-scatter
  double zero_gather_ms = 0;  // ZeRO-1: all-gather of the updated parameters
  double embedding_ms = 0;    // PP > 1: the tied embedding's gradient all-reduce between first and last stage
  double optimizer_ms = 0;    // optimizer_ns_per_param x parameters stepped by this rank + fixed_ms
  double total_ms = 0;
  double tflops_per_gpu = 0;  // model FLOPs / (total time x world), as the training log reports
  double tokens_per_s = 0;
};

/// Megatron's divisibility rules for a layout (heads % TP, ffn % TP, layers % PP, global batch % (mb x DP)); returns
/// "" when valid, else the reason.
std::string layout_problem(const ModelSpec& spec, const Layout& l);

/// Whether the hidden dropout is drawn inside the fused LayerNorm kernels for `spec` (the default: bf16 or fp16, the
/// fused LayerNorm on, --no-dropout-layernorm-fusion not given), as model::TransformerLayer decides on CUDA.
bool hidden_dropout_in_kernels(const ModelSpec& spec);

/// Predicts one layout (which must be valid) on `cluster` with `cal`.
StepPrediction predict(const ModelSpec& spec, const Layout& l, const Cluster& cluster, const Calibration& cal);

/// Time of a ring all-reduce of `bytes` over `group` ranks at bus bandwidth `gbps` (GB/s): 2(g-1)/g x bytes / bw.
double ring_allreduce_ms(double bytes, int group, double gbps);
/// Reduce-scatter or all-gather: (g-1)/g x bytes / bw.
double ring_gather_ms(double bytes, int group, double gbps);

}  // namespace megaton::plan
