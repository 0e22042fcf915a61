// Point-to-point transfers between neighbouring pipeline stages (Megatron's p2p_communication.py) over the pp
// Communicator. Every tensor crossing a stage boundary is a hidden state [s, b, h] (or its gradient) whose shape and
// dtype both sides know in advance, so no shape exchange happens. On the first stage recv_forward/send_backward are
// no-ops (recv returns an undefined tensor); on the last stage send_forward/recv_backward are.
//
// The interleaved schedule uses the ring variants below: the pipeline is a ring (stage PP-1 sends forward to stage 0,
// which runs the next model chunk; gradients go the other way) and the caller says what is sent and received (an
// undefined tensor or a false flag skips that side), as Megatron's _communicate. Each is one Communicator::send_recv
// per direction (forward ring first, then backward ring, on every rank): a step holds at most one send and one
// receive per direction, so the messages between two ranks are matched in the same order on both sides even at
// PP = 2 (where the previous and next stage are the same rank) and no ordering deadlock can arise; see
// schedules.h for the argument.
#pragma once
#include <torch/torch.h>

#include <utility>
#include <vector>

#include "dist/communicator.h"

namespace megaton::parallel::pipeline {

class P2p {
 public:
  /// `pp` is this rank's pipeline group (rank = stage). `shape` [s, b, h]; `options` dtype + device of activations.
  P2p(dist::Communicator& pp, std::vector<int64_t> shape, torch::TensorOptions options);

  bool is_first_stage() const { return stage_ == 0; }
  bool is_last_stage() const { return stage_ == stages_ - 1; }
  int stage() const { return stage_; }
  int stages() const { return stages_; }

  torch::Tensor recv_forward();                         // from stage - 1
  void send_forward(const torch::Tensor& output);       // to stage + 1
  torch::Tensor recv_backward();                        // from stage + 1
  void send_backward(const torch::Tensor& input_grad);  // to stage - 1
  /// Sends the output to stage + 1 and receives the gradient of an earlier output from it (steady 1F1B).
  torch::Tensor send_forward_recv_backward(const torch::Tensor& output);
  /// Sends an input gradient to stage - 1 and receives the next input from it (steady 1F1B).
  torch::Tensor send_backward_recv_forward(const torch::Tensor& input_grad);

  // Ring transfers (interleaved schedule). next = (stage + 1) % PP, prev = (stage - 1 + PP) % PP.
  /// Sends `output` (if defined) to next; receives from prev if `recv_prev` (else returns undefined).
  torch::Tensor ring_send_forward_recv_forward(const torch::Tensor& output, bool recv_prev);
  /// Sends `input_grad` (if defined) to prev; receives from next if `recv_next` (else returns undefined).
  torch::Tensor ring_send_backward_recv_backward(const torch::Tensor& input_grad, bool recv_next);
  /// Both of the above, forward direction first: {input from prev, output gradient from next}.
  std::pair<torch::Tensor, torch::Tensor> ring_send_forward_backward_recv_forward_backward(
      const torch::Tensor& output, const torch::Tensor& input_grad, bool recv_prev, bool recv_next);

 private:
  torch::Tensor empty() const { return torch::empty(shape_, options_); }
  int next() const { return (stage_ + 1) % stages_; }
  int prev() const { return (stage_ - 1 + stages_) % stages_; }
  dist::Communicator& pp_;
  std::vector<int64_t> shape_;
  torch::TensorOptions options_;
  int stage_, stages_;
};

}  // namespace megaton::parallel::pipeline
