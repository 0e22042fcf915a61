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

}  // namespace megaton::parallel::pipeline
