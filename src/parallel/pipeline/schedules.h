// Forward/backward schedules over the micro-batches of one iteration (Megatron's schedules.py), independent of the
// model: the caller supplies the forward of one micro-batch on this stage and the schedule moves activations and
// gradients between stages with P2p.
//
//   no pipelining (PP = 1):  F0 B0 F1 B1 ... (each backward right after its forward, gradients accumulate)
//   1F1B (PP > 1):           warmup of min(PP - stage - 1, M) forwards, then steady one-forward-one-backward
//                            (send_forward_recv_backward / send_backward_recv_forward), then the cooldown backwards.
//                            At most PP - stage micro-batches of activations are alive on a stage at once.
// Backward of a stage: autograd from its output with the received gradient (the last stage from its scalar loss);
// the received input hidden state is a leaf requiring grad whose .grad is sent to the previous stage.
// Backwards run in micro-batch order 0..M-1 in every schedule, so before_backward(M - 1) marks the last one (the
// data-parallel hooks start their bucket reductions there). Tied embedding gradients are summed afterwards by the
// caller (DataParallel::finish_grad_sync or model::all_reduce_tied_embedding_grads).
#pragma once
#include <torch/torch.h>

#include <functional>

#include "parallel/pipeline/p2p.h"

namespace megaton::parallel::pipeline {

struct StageStep {
  /// Forward of micro-batch `mb` on this stage. `input`: the hidden state [s, b, h] from the previous stage (a leaf
  /// requiring grad) on all but the first stage, undefined on the first. Returns the stage output [s, b, h], or on
  /// the last stage the scalar to differentiate (its loss / M * loss scale); the callback records losses itself.
  std::function<torch::Tensor(int mb, const torch::Tensor& input)> forward;
  /// Called just before the backward of micro-batch `mb` (may be empty).
  std::function<void(int mb)> before_backward;
};

/// PP = 1: forward and backward of each micro-batch in turn.
void forward_backward_no_pipelining(int num_microbatches, const StageStep& step);

/// PP > 1 (works for PP = 1 too): the non-interleaved 1F1B schedule. Collective over the pipeline group.
void forward_backward_1f1b(int num_microbatches, P2p& p2p, const StageStep& step);

/// Evaluation: forwards only, under NoGradGuard, outputs passed on to the next stage. Collective over the pipeline.
void forward_only(int num_microbatches, P2p& p2p, const StageStep& step);

/// Backward of one micro-batch on a stage: output.backward(output_grad) (output_grad undefined: output is the
/// scalar loss), returns input's gradient (undefined when input is).
torch::Tensor backward_step(const torch::Tensor& input, const torch::Tensor& output, const torch::Tensor& output_grad);

}  // namespace megaton::parallel::pipeline
