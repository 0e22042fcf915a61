// A communicator whose every operation is timed by a Timer: the exposed communication of a group. Training wraps its
// data-parallel and pipeline groups in one each ("dp-comm", "pp-comm"), so the log shows the time a step spent in
// them that did not overlap other work: with the device clock a span is the operation's time on the compute stream
// (NCCL kernels there, or the staged copies with the host blocked in MPI between them); on the CPU, the wall time of
// the blocking MPI call.
#pragma once
#include <memory>

#include "core/timer.h"
#include "dist/communicator.h"

namespace megaton::dist {

class TimedCommunicator : public Communicator {
 public:
  /// `timer` must outlive this object.
  TimedCommunicator(CommunicatorPtr inner, Timer& timer) : inner_(std::move(inner)), timer_(timer) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }
  const std::vector<int>& members() const override { return inner_->members(); }
  const CommunicatorPtr& inner() const { return inner_; }

  void all_reduce(torch::Tensor& t, ReduceOp op) override;
  void all_gather(torch::Tensor& out, const torch::Tensor& in) override;
  void reduce_scatter(torch::Tensor& out, const torch::Tensor& in, ReduceOp op) override;
  void broadcast(torch::Tensor& t, int root) override;
  void send(const torch::Tensor& t, int peer) override;
  void recv(torch::Tensor& t, int peer) override;
  void send_recv(const torch::Tensor& send, int send_peer, torch::Tensor& recv, int recv_peer) override;
  void barrier() override;

  /// Starting is not timed (it only posts the operation); the Work's wait() is, so a reduction that finished behind
  /// other work counts as the little time its wait took.
  WorkPtr start_all_reduce(torch::Tensor t, ReduceOp op) override;
  WorkPtr start_all_gather(torch::Tensor out, torch::Tensor in) override;
  WorkPtr start_reduce_scatter(torch::Tensor out, torch::Tensor in, ReduceOp op) override;

 private:
  CommunicatorPtr inner_;
  Timer& timer_;
};

/// `c` wrapped so that its operations accumulate in timers(name); a group of size 1 is returned as is (it never
/// waits) and makes no timer.
CommunicatorPtr timed(CommunicatorPtr c, Timers& timers, const std::string& name);

}  // namespace megaton::dist
