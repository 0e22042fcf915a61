#include "dist/staged_communicator.h"

namespace megaton::dist {

namespace {

bool on_device(const torch::Tensor& t) {
  return t.defined() && !t.device().is_cpu();
}

/// A contiguous host copy of `t` in pinned memory; the copy waits for the work that writes `t`.
torch::Tensor to_host(const torch::Tensor& t) {
  torch::Tensor h = torch::empty(t.sizes(), t.options().device(torch::kCPU).pinned_memory(true));
  h.copy_(t);
  return h;
}

/// An uninitialised pinned host buffer shaped like `t`.
torch::Tensor host_like(const torch::Tensor& t) {
  return torch::empty(t.sizes(), t.options().device(torch::kCPU).pinned_memory(true));
}

}  // namespace

void StagedCommunicator::all_reduce(torch::Tensor& t, ReduceOp op) {
  if (!on_device(t)) return mpi_->all_reduce(t, op);
  torch::Tensor h = to_host(t);
  mpi_->all_reduce(h, op);
  t.copy_(h);
}

void StagedCommunicator::all_gather(torch::Tensor& out, const torch::Tensor& in) {
  if (!on_device(out) && !on_device(in)) return mpi_->all_gather(out, in);
  torch::Tensor hin = on_device(in) ? to_host(in) : in, hout = host_like(out);
  mpi_->all_gather(hout, hin);
  out.copy_(hout);
}

void StagedCommunicator::reduce_scatter(torch::Tensor& out, const torch::Tensor& in, ReduceOp op) {
  if (!on_device(out) && !on_device(in)) return mpi_->reduce_scatter(out, in, op);
  torch::Tensor hin = on_device(in) ? to_host(in) : in, hout = host_like(out);
  mpi_->reduce_scatter(hout, hin, op);
  out.copy_(hout);
}

void StagedCommunicator::broadcast(torch::Tensor& t, int root) {
  if (!on_device(t)) return mpi_->broadcast(t, root);
  torch::Tensor h = to_host(t);
  mpi_->broadcast(h, root);
  t.copy_(h);
}

void StagedCommunicator::send(const torch::Tensor& t, int peer) {
  if (!on_device(t)) return mpi_->send(t, peer);
  mpi_->send(to_host(t), peer);
}

void StagedCommunicator::recv(torch::Tensor& t, int peer) {
  if (!on_device(t)) return mpi_->recv(t, peer);
  torch::Tensor h = host_like(t);
  mpi_->recv(h, peer);
  t.copy_(h);
}

void StagedCommunicator::send_recv(const torch::Tensor& send, int send_peer, torch::Tensor& recv, int recv_peer) {
  if (!on_device(send) && !on_device(recv)) return mpi_->send_recv(send, send_peer, recv, recv_peer);
  const torch::Tensor hs = on_device(send) ? to_host(send) : send;
  torch::Tensor hr = on_device(recv) ? host_like(recv) : recv;
  mpi_->send_recv(hs, send_peer, hr, recv_peer);
  if (on_device(recv)) recv.copy_(hr);
}

}  // namespace megaton::dist
