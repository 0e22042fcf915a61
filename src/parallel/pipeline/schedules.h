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
//
//   interleaved 1F1B (--num-layers-per-virtual-pipeline-stage): Megatron's
//   forward_backward_pipelining_with_interleaving. Each rank holds V model chunks; chunk k of stage p is virtual
//   stage k * PP + p, so activations travel the PP ranks V times round a ring. The M * V forward steps of a rank run
//   in groups of PP micro-batches per chunk (step k: chunk (k mod PP*V) / PP, micro-batch (k / (PP*V)) * PP +
//   k mod PP; backwards visit the chunks in reverse). Warmup: (PP - stage - 1) * 2 + (V - 1) * PP forwards (capped
//   at M * V; all of them when M == PP), then 1F1B, then the cooldown backwards. Needs M % PP == 0.
//   Communication: Megatron's send_forward_recv_forward, send_backward_recv_backward and
//   send_forward_backward_recv_forward_backward, each done as (at most) one send_recv on the forward ring followed
//   by one on the backward ring, in the same order on every rank. Why this cannot deadlock or mismatch: every
//   message's sender and receiver agree on whether it exists (Megatron's recv_prev / recv_next rules), messages
//   between two ranks are matched in posting order (one MPI tag; NCCL per-peer order), and with the forward part of
//   every step before its backward part the n-th message a rank sends to a peer is the n-th its peer expects from
//   it, also at PP = 2 where both directions link the same two ranks (Megatron's single batched 4-way op swaps them
//   there, which is why Megatron demands PP > 2). Deadlock freedom under rendezvous (synchronous) sends was checked
//   by simulating the per-rank sequences of steps for PP 2..6, V 2..4, M = PP..4 PP, training and forward-only
//   (tests/parallel/interleaved_schedule_sim.py).
//   Backwards of one chunk run in micro-batch order, so before_backward(chunk, M - 1) marks that chunk's last one.
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

struct ChunkedStep {
  /// Forward of micro-batch `mb` on model chunk `chunk` of this rank; `input` as in StageStep (undefined only on the
  /// first virtual stage: chunk 0 of stage 0). Returns the chunk output, or on the last virtual stage (chunk V - 1 of
  /// stage PP - 1) the scalar to differentiate (forward-only: anything, it is dropped).
  std::function<torch::Tensor(int chunk, int mb, const torch::Tensor& input)> forward;
  /// Called just before the backward of micro-batch `mb` on `chunk` (may be empty).
  std::function<void(int chunk, int mb)> before_backward;
};

/// Interleaved 1F1B over `num_chunks` model chunks per rank (PP >= 2, num_microbatches % PP == 0, else UsageError).
/// forward_only: every forward in turn under NoGradGuard, nothing kept for backward (evaluation).
void forward_backward_interleaved(int num_microbatches, int num_chunks, P2p& p2p, const ChunkedStep& step,
                                  bool forward_only = false);

/// Evaluation: forwards only, under NoGradGuard, outputs passed on to the next stage. Collective over the pipeline.
void forward_only(int num_microbatches, P2p& p2p, const StageStep& step);

/// The schedule a layout calls for, over this rank's `num_chunks` model chunks: the interleaved one with more than
/// one chunk; else forward_only (evaluation), no pipelining (one stage) or 1F1B. The one entry point for running an
/// iteration's micro-batches; with one chunk the step's `chunk` is always 0. Collective over the pipeline group.
void run_schedule(int num_microbatches, int num_chunks, P2p& p2p, const ChunkedStep& step, bool forward_only);

/// Backward of one micro-batch on a stage: output.backward(output_grad) (output_grad undefined: output is the
/// scalar loss), returns input's gradient (undefined when input is).
torch::Tensor backward_step(const torch::Tensor& input, const torch::Tensor& output, const torch::Tensor& output_grad);

}  // namespace megaton::parallel::pipeline
