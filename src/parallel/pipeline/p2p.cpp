#include "parallel/pipeline/p2p.h"

#include "core/error.h"

namespace megaton::parallel::pipeline {

P2p::P2p(dist::Communicator& pp, std::vector<int64_t> shape, torch::TensorOptions options)
    : pp_(pp), shape_(std::move(shape)), options_(options), stage_(pp.rank()), stages_(pp.size()) {
  MEGATON_CHECK(shape_.size() == 3, InternalError, "pipeline activations are [s, b, h], got ", shape_.size(), " dims");
}

namespace {
torch::Tensor checked(const torch::Tensor& t, const std::vector<int64_t>& shape, const torch::TensorOptions& o,
                      const char* what) {
  MEGATON_CHECK(t.defined() && t.sizes().vec() == shape, InternalError, "pipeline ", what, ": expected shape ",
                c10::IntArrayRef(shape), ", got ", t.defined() ? t.sizes() : c10::IntArrayRef{});
  return t.detach().to(o.dtype()).contiguous();
}
}  // namespace

torch::Tensor P2p::recv_forward() {
  if (is_first_stage()) return {};
  torch::Tensor t = empty();
  pp_.recv(t, stage_ - 1);
  return t;
}

void P2p::send_forward(const torch::Tensor& output) {
  if (is_last_stage()) return;
  pp_.send(checked(output, shape_, options_, "send_forward"), stage_ + 1);
}

torch::Tensor P2p::recv_backward() {
  if (is_last_stage()) return {};
  torch::Tensor t = empty();
  pp_.recv(t, stage_ + 1);
  return t;
}

void P2p::send_backward(const torch::Tensor& input_grad) {
  if (is_first_stage()) return;
  pp_.send(checked(input_grad, shape_, options_, "send_backward"), stage_ - 1);
}

torch::Tensor P2p::send_forward_recv_backward(const torch::Tensor& output) {
  if (is_last_stage()) return {};
  torch::Tensor grad = empty();
  pp_.send_recv(checked(output, shape_, options_, "send_forward"), stage_ + 1, grad, stage_ + 1);
  return grad;
}

torch::Tensor P2p::send_backward_recv_forward(const torch::Tensor& input_grad) {
  if (is_first_stage()) return {};
  torch::Tensor input = empty();
  pp_.send_recv(checked(input_grad, shape_, options_, "send_backward"), stage_ - 1, input, stage_ - 1);
  return input;
}

torch::Tensor P2p::ring_send_forward_recv_forward(const torch::Tensor& output, bool recv_prev) {
  torch::Tensor input = recv_prev ? empty() : torch::Tensor();
  torch::Tensor out = output.defined() ? checked(output, shape_, options_, "send_forward") : torch::Tensor();
  if (out.defined() || input.defined()) pp_.send_recv(out, next(), input, prev());
  return input;
}

torch::Tensor P2p::ring_send_backward_recv_backward(const torch::Tensor& input_grad, bool recv_next) {
  torch::Tensor grad = recv_next ? empty() : torch::Tensor();
  torch::Tensor in = input_grad.defined() ? checked(input_grad, shape_, options_, "send_backward") : torch::Tensor();
  if (in.defined() || grad.defined()) pp_.send_recv(in, prev(), grad, next());
  return grad;
}

std::pair<torch::Tensor, torch::Tensor> P2p::ring_send_forward_backward_recv_forward_backward(
    const torch::Tensor& output, const torch::Tensor& input_grad, bool recv_prev, bool recv_next) {
  torch::Tensor input = ring_send_forward_recv_forward(output, recv_prev);
  torch::Tensor grad = ring_send_backward_recv_backward(input_grad, recv_next);
  return {input, grad};
}

}  // namespace megaton::parallel::pipeline
