// Collectives over one process group. Two implementations: MpiCommunicator (CPU tensors, any dtype) and
// NcclCommunicator (CUDA tensors; built from MPI by broadcasting a unique id over the group). Ranks passed in and
// returned are the group's own ranks (0..size-1). Every op that waits longer than the group's timeout throws
// CommError naming the group and the op; main ends the job with it (dist/job_error.h), so no rank is left hanging.
//
// The start_* collectives return at once with a Work; its wait() completes the operation, after which the results may
// be read (on a GPU: by work queued on the caller's current stream after wait(); the host does not block). Between
// start and wait the caller must not touch the tensors, and every rank must start the group's operations in the same
// order. Data-parallel gradient reduction starts a bucket's as soon as backward has produced it and waits for all of
// them before the optimizer step, so communication overlaps the rest of backward.
#pragma once
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

namespace megaton::dist {

enum class ReduceOp { kSum, kAvg, kMax, kMin };

/// An operation in flight (Communicator::start_*). Destroying one that was not waited for waits for it, so the buffers
/// it holds are never freed under the operation.
class Work {
 public:
  virtual ~Work() = default;
  /// Completes the operation; idempotent. Throws CommError (timeout, peer failure) like the blocking calls.
  virtual void wait() = 0;

 protected:
  /// For a destructor: wait() unless an exception is unwinding the stack (an aborting job does not wait on its
  /// peers); a failure is printed, since a destructor cannot throw.
  void wait_unless_unwinding() noexcept;
};

using WorkPtr = std::unique_ptr<Work>;

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

  /// The same collectives, started without waiting (see the top of this file). The Work holds the tensors (views
  /// share their storage) until it completes. The defaults run the blocking call and return a completed Work.
  virtual WorkPtr start_all_reduce(torch::Tensor t, ReduceOp op);
  virtual WorkPtr start_all_gather(torch::Tensor out, torch::Tensor in);
  virtual WorkPtr start_reduce_scatter(torch::Tensor out, torch::Tensor in, ReduceOp op);

  /// "group 'tp' (global ranks 0,1)".
  std::string describe() const;
};

using CommunicatorPtr = std::shared_ptr<Communicator>;

const char* reduce_op_name(ReduceOp op);

}  // namespace megaton::dist
