// Communicator over an MPI communicator, for CPU tensors. Non-blocking MPI calls are polled until done or until the
// timeout, so a dead or stuck peer becomes a CommError naming the group and op rather than a hang. The start_*
// collectives return after posting the request; MPI progresses it whenever the rank enters MPI (and on its own where
// the library has a progress thread). Half types (bf16, fp16) are reduced in fp32, since MPI has no arithmetic for
// them.
#pragma once
#include <mpi.h>

#include "dist/communicator.h"

namespace megaton::dist {

class MpiCommunicator : public Communicator {
 public:
  /// Takes ownership of `comm` (freed at destruction unless it is MPI_COMM_WORLD). timeout_s <= 0 waits forever.
  MpiCommunicator(MPI_Comm comm, std::string name, std::vector<int> members, double timeout_s);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  const std::vector<int>& members() const override { return members_; }
  MPI_Comm comm() const { return comm_; }

  void all_reduce(torch::Tensor& t, ReduceOp op) override;
  void all_gather(torch::Tensor& out, const torch::Tensor& in) override;
  void reduce_scatter(torch::Tensor& out, const torch::Tensor& in, ReduceOp op) override;
  void broadcast(torch::Tensor& t, int root) override;
  void send(const torch::Tensor& t, int peer) override;
  void recv(torch::Tensor& t, int peer) override;
  void send_recv(const torch::Tensor& send, int send_peer, torch::Tensor& recv, int recv_peer) override;
  void barrier() override;

  /// MPI_Iallreduce / MPI_Iallgather / MPI_Ireduce_scatter_block; wait() polls the request like the blocking calls.
  /// The started all-gather's output changes at wait() only.
  WorkPtr start_all_reduce(torch::Tensor t, ReduceOp op) override;
  WorkPtr start_all_gather(torch::Tensor out, torch::Tensor in) override;
  WorkPtr start_reduce_scatter(torch::Tensor out, torch::Tensor in, ReduceOp op) override;

  /// Polls `req` until it completes; CommError after the group's timeout.
  void wait(MPI_Request& req, const char* op);

 private:
  void check(int rc, const char* op) const;
  WorkPtr post_all_gather(torch::Tensor out, torch::Tensor in, bool into_scratch);

  MPI_Comm comm_;
  std::string name_;
  std::vector<int> members_;
  double timeout_s_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace megaton::dist
