// Point-to-point transfers between neighbouring pipeline stages (Megatron's p2p_communication.py) over the pp
// Communicator. Every tensor crossing a stage boundary is a hidden state [s, b, h] (or its gradient) whose shape and
// dtype both sides know in advance, so no shape exchange happens. On the first stage recv_forward/send_backward are
// no-ops (recv returns an undefined tensor); on the last stage send_forward/recv_backward are.
#pragma once
#include <torch/torch.h>

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

  torch::Tensor recv_forward();                     // from stage - 1
  void send_forward(const torch::Tensor& output);   // to stage + 1
  torch::Tensor recv_backward();                    // from stage + 1
  void send_backward(const torch::Tensor& input_grad);  // to stage - 1
  /// Sends the output to stage + 1 and receives the gradient of an earlier output from it (steady 1F1B).
  torch::Tensor send_forward_recv_backward(const torch::Tensor& output);
  /// Sends an input gradient to stage - 1 and receives the next input from it (steady 1F1B).
  torch::Tensor send_backward_recv_forward(const torch::Tensor& input_grad);

 private:
  torch::Tensor empty() const { return torch::empty(shape_, options_); }
  dist::Communicator& pp_;
  std::vector<int64_t> shape_;
  torch::TensorOptions options_;
  int stage_, stages_;
};

}  // namespace megaton::parallel::pipeline
