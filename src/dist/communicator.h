// Collectives over one process group. Two implementations: MpiCommunicator (CPU tensors, any dtype) and
// NcclCommunicator (CUDA tensors; built from MPI by broadcasting a unique id over the group). Ranks passed in and
// returned are the group's own ranks (0..size-1). Every op that waits longer than the group's timeout throws
// CommError naming the group and the op; main ends the job with it (dist/job_error.h), so no rank is left hanging.
#pragma once
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

namespace megaton::dist {

enum class ReduceOp { kSum, kAvg, kMax, kMin };

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "tp", "dp", "pp", "world", ... and its members' global ranks, for error messages.
  virtual const std::string& name() const = 0;
  virtual const std::vector<int>& members() const = 0;

  /// In place: t <- op over the group of t.
  virtual void all_reduce(torch::Tensor& t, ReduceOp op = ReduceOp::kSum) = 0;
  /// out [size * n] <- concatenation of every rank's in [n], in group-rank order (flat, contiguous).
  virtual void all_gather(torch::Tensor& out, const torch::Tensor& in) = 0;
  /// out [n] <- op over ranks of in[rank*n : (rank+1)*n], in [size * n] (flat, contiguous).
  virtual void reduce_scatter(torch::Tensor& out, const torch::Tensor& in, ReduceOp op = ReduceOp::kSum) = 0;
  /// In place: t <- t of `root`.
  virtual void broadcast(torch::Tensor& t, int root) = 0;
  virtual void send(const torch::Tensor& t, int peer) = 0;
  virtual void recv(torch::Tensor& t, int peer) = 0;
  /// Both at once, without ordering deadlocks (pipeline send_forward_recv_backward): sends `send` to `send_peer` and
  /// receives into `recv` from `recv_peer`. Either side may be skipped by passing an undefined tensor.
  virtual void send_recv(const torch::Tensor& send, int send_peer, torch::Tensor& recv, int recv_peer) = 0;
  virtual void barrier() = 0;

  /// "group 'tp' (global ranks 0,1)".
  std::string describe() const;
};

using CommunicatorPtr = std::shared_ptr<Communicator>;

const char* reduce_op_name(ReduceOp op);

}  // namespace megaton::dist
