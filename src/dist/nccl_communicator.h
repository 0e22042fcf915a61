// Communicator over NCCL for CUDA tensors. The NCCL communicator is built from an MPI group: its rank 0 makes the
// unique id and broadcasts it over MPI. Ops are enqueued on LibTorch's current CUDA stream and return at once; a
// watchdog thread follows each op's completion event, and one still pending after the timeout aborts the NCCL
// communicator and the whole job (exit code 5) with the group and op named, as PyTorch's NCCL watchdog does.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "dist/mpi_communicator.h"

namespace megaton::dist {

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(std::shared_ptr<MpiCommunicator> mpi, double timeout_s);
  ~NcclCommunicator() override;

  int rank() const override { return mpi_->rank(); }
  int size() const override { return mpi_->size(); }
  const std::string& name() const override { return mpi_->name(); }
  const std::vector<int>& members() const override { return mpi_->members(); }

  void all_reduce(torch::Tensor& t, ReduceOp op) override;
  void all_gather(torch::Tensor& out, const torch::Tensor& in) override;
  void reduce_scatter(torch::Tensor& out, const torch::Tensor& in, ReduceOp op) override;
  void broadcast(torch::Tensor& t, int root) override;
  void send(const torch::Tensor& t, int peer) override;
  void recv(torch::Tensor& t, int peer) override;
  void send_recv(const torch::Tensor& send, int send_peer, torch::Tensor& recv, int recv_peer) override;
  void barrier() override;

 private:
  struct Pending;
  void track(const char* op);
  void watchdog_loop();

  std::shared_ptr<MpiCommunicator> mpi_;
  double timeout_s_;
  void* comm_ = nullptr;  // ncclComm_t (kept opaque so this header needs no nccl.h)
  int device_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Pending>> pending_;
  std::atomic<bool> stop_{false};
  std::thread watchdog_;
};

}  // namespace megaton::dist
