#include "dist/timed_communicator.h"

namespace megaton::dist {

namespace {

// Starts the timer for one operation and stops it when the operation returns or throws.
class Span {
 public:
  explicit Span(Timer& t) : t_(t) { t_.start(); }
  ~Span() { t_.stop(); }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  Timer& t_;
};

// An operation whose wait is timed.
class TimedWork : public Work {
 public:
  TimedWork(WorkPtr inner, Timer& t) : inner_(std::move(inner)), t_(t) {}
  void wait() override {
    if (waited_) return;
    waited_ = true;
    Span s(t_);
    inner_->wait();
  }

 private:
  WorkPtr inner_;
  Timer& t_;
  bool waited_ = false;
};

}  // namespace

WorkPtr TimedCommunicator::start_all_reduce(torch::Tensor t, ReduceOp op) {
  return std::make_unique<TimedWork>(inner_->start_all_reduce(std::move(t), op), timer_);
}

WorkPtr TimedCommunicator::start_all_gather(torch::Tensor out, torch::Tensor in) {
  return std::make_unique<TimedWork>(inner_->start_all_gather(std::move(out), std::move(in)), timer_);
}

WorkPtr TimedCommunicator::start_reduce_scatter(torch::Tensor out, torch::Tensor in, ReduceOp op) {
  return std::make_unique<TimedWork>(inner_->start_reduce_scatter(std::move(out), std::move(in), op), timer_);
}

void TimedCommunicator::all_reduce(torch::Tensor& t, ReduceOp op) {
  Span s(timer_);
  inner_->all_reduce(t, op);
}

void TimedCommunicator::all_gather(torch::Tensor& out, const torch::Tensor& in) {
  Span s(timer_);
  inner_->all_gather(out, in);
}

void TimedCommunicator::reduce_scatter(torch::Tensor& out, const torch::Tensor& in, ReduceOp op) {
  Span s(timer_);
  inner_->reduce_scatter(out, in, op);
}

void TimedCommunicator::broadcast(torch::Tensor& t, int root) {
  Span s(timer_);
  inner_->broadcast(t, root);
}

void TimedCommunicator::send(const torch::Tensor& t, int peer) {
  Span s(timer_);
  inner_->send(t, peer);
}

void TimedCommunicator::recv(torch::Tensor& t, int peer) {
  Span s(timer_);
  inner_->recv(t, peer);
}

void TimedCommunicator::send_recv(const torch::Tensor& send, int send_peer, torch::Tensor& recv, int recv_peer) {
  Span s(timer_);
  inner_->send_recv(send, send_peer, recv, recv_peer);
}

void TimedCommunicator::barrier() {
  Span s(timer_);
  inner_->barrier();
}

CommunicatorPtr timed(CommunicatorPtr c, Timers& timers, const std::string& name) {
  if (c->size() == 1) return c;
  return std::make_shared<TimedCommunicator>(std::move(c), timers(name));
}

}  // namespace megaton::dist
