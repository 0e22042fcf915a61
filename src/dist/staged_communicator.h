// MPI collectives on CUDA tensors through host memory, so several ranks can share one GPU (NCCL refuses two ranks on
// the same device) and a machine without NCCL still runs the GPU code multi-rank: each CUDA tensor is copied into a
// pinned host buffer (the copy waits for the device's pending writes), the MPI operation runs on the host copy, and
// results are copied back before the call returns. CPU tensors go straight to the MPI communicator. Correctness,
// not speed: this is the path of `--distributed-backend mpi` with `--device cuda`.
#pragma once
#include <memory>

#include "dist/mpi_communicator.h"

namespace megaton::dist {

class StagedCommunicator : public Communicator {
 public:
  explicit StagedCommunicator(std::shared_ptr<MpiCommunicator> mpi) : mpi_(std::move(mpi)) {}

  int rank() const override { return mpi_->rank(); }
  int size() const override { return mpi_->size(); }
  const std::string& name() const override { return mpi_->name(); }
  const std::vector<int>& members() const override { return mpi_->members(); }
  const std::shared_ptr<MpiCommunicator>& mpi() const { return mpi_; }

  void all_reduce(torch::Tensor& t, ReduceOp op) override;
  void all_gather(torch::Tensor& out, const torch::Tensor& in) override;
  void reduce_scatter(torch::Tensor& out, const torch::Tensor& in, ReduceOp op) override;
  void broadcast(torch::Tensor& t, int root) override;
  void send(const torch::Tensor& t, int peer) override;
  void recv(torch::Tensor& t, int peer) override;
  void send_recv(const torch::Tensor& send, int send_peer, torch::Tensor& recv, int recv_peer) override;
  void barrier() override { mpi_->barrier(); }

  /// The device data are copied to the host when the operation starts (waiting for the device's pending writes),
  /// the MPI request is posted, and wait() completes it and copies the result back.
  WorkPtr start_all_reduce(torch::Tensor t, ReduceOp op) override;
  WorkPtr start_all_gather(torch::Tensor out, torch::Tensor in) override;
  WorkPtr start_reduce_scatter(torch::Tensor out, torch::Tensor in, ReduceOp op) override;

 private:
  std::shared_ptr<MpiCommunicator> mpi_;
};

}  // namespace megaton::dist
