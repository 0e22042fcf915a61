// One Adam step (AdamW: decoupled weight decay, bias-corrected moments) on flat [S] fp32 buffers, two ways:
//   adam_step_aten   ~10 ATen passes (the CPU path of MixedPrecisionOptimizer, and the reference of the other);
//   adam_step_fused  CUDA only (adam_cuda.cpp -> kernels/adam_kernels.cu): one kernel that reads the gradient, both
//                    moments and the master once, writes them once, and can write the rounded parameters too.
// Both apply weight decay to the elements inside `decay runs` only. The fused kernel walks a table of chunks built
// by adam_chunk_table, here in every build so that CPU tests can check it.
#pragma once
#include <torch/torch.h>

#include <vector>

#include "adam_hyper.h"  // kernels/
#include "optim/flat_runs.h"

namespace megaton::optim {

/// The host-side scalars of one step.
struct AdamScalars {
  kernels::AdamHyper hyper;         // lr, betas, eps, weight decay, bias corrections, grad_scale (its pointer unused)
  torch::Tensor device_grad_scale;  // undefined, or fp32 [1] on the grads' device: used instead of hyper.grad_scale
};

/// Runs whose Adam update (not weight decay) takes lr * scale: ParamInfo::lr_scale (muP).
struct ScaledRuns {
  std::vector<Run> runs;
  double scale = 1.0;
};

/// master, exp_avg, exp_avg_sq [S] fp32 updated in place; grad [S] fp32, scaled in place by grad_scale (when not 1)
/// and then overwritten (scratch for the denominator). Any device. `lr_scales`: the update of these runs is
/// multiplied by their scale (the denominator is divided by it).
void adam_step_aten(const torch::Tensor& master, const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq,
                    const torch::Tensor& grad, const std::vector<Run>& decay_runs, const AdamScalars& s,
                    const std::vector<ScaledRuns>& lr_scales = {});

/// Elements per chunk: one thread block's work (kernels::kAdamChunk; adam_cuda.cpp checks that they agree).
constexpr int64_t kAdamChunk = 65536;

/// The fused kernel's chunk table of a flat buffer of `numel` elements: [C, 3] int64 on the CPU, rows
/// {start, len, decay} in order, covering [0, numel) exactly, each at most `chunk` long and never straddling the
/// boundary of a decay run; decay is 1 inside `decay_runs` (sorted, disjoint: merge_runs' output), 0 elsewhere.
torch::Tensor adam_chunk_table(const std::vector<Run>& decay_runs, int64_t numel, int64_t chunk = kAdamChunk);

/// adam_step_aten's result in one kernel on the current CUDA stream; grad is only read. master, exp_avg, exp_avg_sq,
/// grad: [S] fp32, contiguous, on one CUDA device. chunks: adam_chunk_table(decay_runs, S) on that device.
/// param_out: undefined, or [S] fp32/bf16/fp16 contiguous (the model's parameters), receiving the new masters rounded
/// to its dtype. packs_per_pass: the kernel's work split (kernels::AdamTuning: 1, 2 or 4; the same bits with each). In
/// a build without MEGATON_HAVE_CUDA (adam_cuda.cpp not compiled) it throws InternalError.
void adam_step_fused(const torch::Tensor& master, const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq,
                     const torch::Tensor& grad, const torch::Tensor& chunks, const AdamScalars& s,
                     const torch::Tensor& param_out = {}, int packs_per_pass = 1);

}  // namespace megaton::optim
