// Communicator over NCCL for CUDA tensors. The NCCL communicator is built from an MPI group: its rank 0 makes the
// unique id and broadcasts it over MPI. Ops are enqueued on LibTorch's current CUDA stream and return at once. The
// start_* ops go on the communicator's own high-priority stream instead, after the work queued so far on the current
// stream (an event), so they run beside the compute that follows; their wait() makes the current stream wait for them
// (an event; the host does not block). A blocking op issued while started ones may be in flight waits for them on the
// device first, so the group's kernels never run concurrently with each other. A
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

  WorkPtr start_all_reduce(torch::Tensor t, ReduceOp op) override;
  WorkPtr start_all_gather(torch::Tensor out, torch::Tensor in) override;
  WorkPtr start_reduce_scatter(torch::Tensor out, torch::Tensor in, ReduceOp op) override;

 private:
  struct Pending;
  /// The stream a blocking op goes on: the current one, made to wait for started ops still possibly in flight.
  void* blocking_stream();
  /// Orders the comm stream after the current stream's queued work; returns the comm stream (cudaStream_t).
  void* begin_started();
  /// Records the started op's completion; returns its Work holding `keep`.
  WorkPtr end_started(const char* op, std::vector<torch::Tensor> keep);
  void track(const char* op, void* stream);
  void enqueue_all_reduce(torch::Tensor& t, ReduceOp op, void* stream);
  void enqueue_all_gather(torch::Tensor& out, const torch::Tensor& in, void* stream);
  void enqueue_reduce_scatter(torch::Tensor& out, const torch::Tensor& in, ReduceOp op, void* stream);
  void watchdog_loop();

  std::shared_ptr<MpiCommunicator> mpi_;
  double timeout_s_;
  void* comm_ = nullptr;  // ncclComm_t (kept opaque so this header needs no nccl.h)
  int device_ = 0;
  void* comm_stream_ = nullptr;   // cudaStream_t of the start_* ops
  void* ready_ = nullptr;         // cudaEvent_t: the current stream's position when an op is started
  void* started_done_ = nullptr;  // cudaEvent_t: the last started op's completion
  bool started_in_flight_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Pending>> pending_;
  std::atomic<bool> stop_{false};
  std::thread watchdog_;
};

}  // namespace megaton::dist
