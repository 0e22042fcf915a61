#include "parallel/pipeline/schedules.h"

#include <algorithm>
#include <deque>

#include "core/error.h"

namespace megaton::parallel::pipeline {

namespace {

torch::Tensor as_input_leaf(torch::Tensor received) {
  if (received.defined()) received.requires_grad_(true);
  return received;
}

void before(const StageStep& step, int mb) {
  if (step.before_backward) step.before_backward(mb);
}

}  // namespace

torch::Tensor backward_step(const torch::Tensor& input, const torch::Tensor& output, const torch::Tensor& output_grad) {
  MEGATON_CHECK(output.defined(), InternalError, "pipeline backward without a forward output");
  if (output_grad.defined())
    output.backward(output_grad);
  else
    output.backward();
  if (!input.defined()) return {};
  torch::Tensor g = input.grad();
  MEGATON_CHECK(g.defined(), InternalError, "pipeline backward: the stage input received no gradient");
  return g;
}

void forward_backward_no_pipelining(int num_microbatches, const StageStep& step) {
  MEGATON_CHECK(num_microbatches > 0, InternalError, "an iteration needs at least one micro-batch");
  for (int mb = 0; mb < num_microbatches; ++mb) {
    torch::Tensor out = step.forward(mb, torch::Tensor());
    before(step, mb);
    backward_step({}, out, {});
  }
}

void forward_backward_1f1b(int num_microbatches, P2p& p2p, const StageStep& step) {
  const int m = num_microbatches;
  MEGATON_CHECK(m > 0, InternalError, "an iteration needs at least one micro-batch");
  const int warmup = std::min(p2p.stages() - p2p.stage() - 1, m);
  const int remaining = m - warmup;
  std::deque<std::pair<torch::Tensor, torch::Tensor>> alive;  // (input, output) of micro-batches awaiting backward
  int next_fwd = 0, next_bwd = 0;

  for (int i = 0; i < warmup; ++i) {
    torch::Tensor input = as_input_leaf(p2p.recv_forward());  // [s, b, h] or undefined on the first stage
    torch::Tensor out = step.forward(next_fwd++, input);
    p2p.send_forward(out);
    alive.emplace_back(input, out);
  }
  torch::Tensor input;
  if (remaining > 0) input = as_input_leaf(p2p.recv_forward());
  for (int i = 0; i < remaining; ++i) {
    const bool last = i == remaining - 1;
    torch::Tensor out = step.forward(next_fwd++, input);
    torch::Tensor out_grad = p2p.send_forward_recv_backward(out);
    alive.emplace_back(input, out);
    auto [in0, out0] = alive.front();
    alive.pop_front();
    before(step, next_bwd++);
    torch::Tensor in_grad = backward_step(in0, out0, out_grad);
    if (last) {
      input = torch::Tensor();
      p2p.send_backward(in_grad);
    } else {
      input = as_input_leaf(p2p.send_backward_recv_forward(in_grad));
    }
  }
  for (int i = 0; i < warmup; ++i) {
    auto [in0, out0] = alive.front();
    alive.pop_front();
    torch::Tensor out_grad = p2p.recv_backward();
    before(step, next_bwd++);
    p2p.send_backward(backward_step(in0, out0, out_grad));
  }
  MEGATON_ASSERT(alive.empty() && next_fwd == m && next_bwd == m, "1F1B schedule left micro-batches behind");
}

void forward_only(int num_microbatches, P2p& p2p, const StageStep& step) {
  torch::NoGradGuard no_grad;
  for (int mb = 0; mb < num_microbatches; ++mb) {
    torch::Tensor input = p2p.recv_forward();
    torch::Tensor out = step.forward(mb, input);
    p2p.send_forward(out);
  }
}

}  // namespace megaton::parallel::pipeline
