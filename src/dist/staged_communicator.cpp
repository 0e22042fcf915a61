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

// The host side's operation in flight; wait() completes it and copies the host result into the device tensor.
class StagedWork : public Work {
 public:
  StagedWork(WorkPtr inner, torch::Tensor device, torch::Tensor host)
      : inner_(std::move(inner)), device_(std::move(device)), host_(std::move(host)) {}
  ~StagedWork() override { wait_unless_unwinding(); }
  void wait() override {
    if (!inner_) return;
    inner_->wait();
    inner_.reset();
    device_.copy_(host_);
  }

 private:
  WorkPtr inner_;
  torch::Tensor device_, host_;
};

}  // namespace

WorkPtr StagedCommunicator::start_all_reduce(torch::Tensor t, ReduceOp op) {
  if (!on_device(t)) return mpi_->start_all_reduce(t, op);
  torch::Tensor h = to_host(t);
  return std::make_unique<StagedWork>(mpi_->start_all_reduce(h, op), t, h);
}

WorkPtr StagedCommunicator::start_all_gather(torch::Tensor out, torch::Tensor in) {
  if (!on_device(out) && !on_device(in)) return mpi_->start_all_gather(out, in);
  torch::Tensor hin = on_device(in) ? to_host(in) : in, hout = host_like(out);
  return std::make_unique<StagedWork>(mpi_->start_all_gather(hout, hin), out, hout);
}

WorkPtr StagedCommunicator::start_reduce_scatter(torch::Tensor out, torch::Tensor in, ReduceOp op) {
  if (!on_device(out) && !on_device(in)) return mpi_->start_reduce_scatter(out, in, op);
  torch::Tensor hin = on_device(in) ? to_host(in) : in, hout = host_like(out);
  return std::make_unique<StagedWork>(mpi_->start_reduce_scatter(hout, hin, op), out, hout);
}

void StagedCommunicator::all_reduce(torch::Tensor& t, ReduceOp op) {
  start_all_reduce(t, op)->wait();
}

void StagedCommunicator::all_gather(torch::Tensor& out, const torch::Tensor& in) {
  start_all_gather(out, in)->wait();
}

void StagedCommunicator::reduce_scatter(torch::Tensor& out, const torch::Tensor& in, ReduceOp op) {
  start_reduce_scatter(out, in, op)->wait();
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
