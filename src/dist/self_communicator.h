// A communicator over a group of one rank: every collective is the identity, point-to-point has no peer. It needs no
// MPI, so single-process code (unit tests, the TP=1 reference every rank computes in the multi-rank tests, tools
// that load a model on one rank) builds the model through exactly the code path of a parallel run.
#pragma once
#include "dist/communicator.h"
#include "dist/process_groups.h"

namespace megaton::dist {

class SelfCommunicator : public Communicator {
 public:
  /// `global_rank` is only used in error messages ("group 'tp' (global ranks 3)").
  explicit SelfCommunicator(std::string name, int global_rank = 0);

  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::string& name() const override { return name_; }
  const std::vector<int>& members() const override { return members_; }

  void all_reduce(torch::Tensor& t, ReduceOp op) override {}
  void all_gather(torch::Tensor& out, const torch::Tensor& in) override;
  void reduce_scatter(torch::Tensor& out, const torch::Tensor& in, ReduceOp op) override;
  void broadcast(torch::Tensor& t, int root) override;
  void send(const torch::Tensor& t, int peer) override;
  void recv(torch::Tensor& t, int peer) override;
  // Declared without `override` so this builds whether or not the Communicator interface has send_recv yet.
  void send_recv(const torch::Tensor& send, int send_peer, torch::Tensor& recv, int recv_peer);
  void barrier() override {}

 private:
  std::string name_;
  std::vector<int> members_;
};

/// Process groups of a single-rank world (TP = PP = DP = 1), every group a SelfCommunicator.
ProcessGroups single_rank_groups();

}  // namespace megaton::dist
