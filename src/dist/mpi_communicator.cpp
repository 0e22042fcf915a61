#include "dist/mpi_communicator.h"

#include <chrono>
#include <exception>
#include <functional>
#include <thread>

#include "core/error.h"

namespace megaton::dist {
namespace {

MPI_Datatype mpi_type(c10::ScalarType t) {
  switch (t) {
    case torch::kFloat32:
      return MPI_FLOAT;
    case torch::kFloat64:
      return MPI_DOUBLE;
    case torch::kInt32:
      return MPI_INT32_T;
    case torch::kInt64:
      return MPI_INT64_T;
    case torch::kUInt8:
      return MPI_UINT8_T;
    case torch::kInt8:
      return MPI_INT8_T;
    case torch::kInt16:
      return MPI_INT16_T;
    case torch::kBool:
      return MPI_C_BOOL;
    default:
      return MPI_DATATYPE_NULL;
  }
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return MPI_SUM;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kMin:
      return MPI_MIN;
  }
  return MPI_SUM;
}

bool is_half(c10::ScalarType t) {
  return t == torch::kBFloat16 || t == torch::kFloat16;
}

void require_cpu_contiguous(const torch::Tensor& t, const Communicator& c, const char* op) {
  MEGATON_CHECK(t.defined() && t.device().is_cpu() && t.is_contiguous(), InternalError, op, " on ", c.describe(),
                ": MPI communicator needs a defined, contiguous CPU tensor");
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::string name, std::vector<int> members, double timeout_s)
    : comm_(comm), name_(std::move(name)), members_(std::move(members)), timeout_s_(timeout_s) {
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  MEGATON_ASSERT(static_cast<int>(members_.size()) == size_, "group ", name_, " member list has ", members_.size(),
                 " ranks but MPI says ", size_);
}

MpiCommunicator::~MpiCommunicator() {
  if (std::uncaught_exceptions() > 0) return;  // the job is being aborted; freeing could wait on dead peers
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCommunicator::check(int rc, const char* op) const {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw CommError(str(op, " on ", describe(), " failed: ", std::string(msg, len)));
}

void MpiCommunicator::wait(MPI_Request& req, const char* op) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  int done = 0;
  int spins = 0;
  while (true) {
    check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), op);
    if (done) return;
    if (timeout_s_ > 0 && std::chrono::duration<double>(Clock::now() - start).count() > timeout_s_) {
      throw CommError(str(op, " on ", describe(), " did not complete within ", timeout_s_,
                          " s (--distributed-timeout-minutes); a peer rank is stuck or dead"));
    }
    // Spin briefly for latency, then back off so oversubscribed ranks leave the core to their peers.
    if (++spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(spins > 100000 ? 1000 : 50));
  }
}

namespace {

// A posted non-blocking collective: the request, the tensors it reads and writes (kept alive until it completes), and
// what is left to do once it has (the average's division, the copy out of an fp32 stand-in for a half tensor).
class MpiWork : public Work {
 public:
  MpiWork(MpiCommunicator& c, const char* op, std::vector<torch::Tensor> keep)
      : c_(c), op_(op), keep_(std::move(keep)) {}
  ~MpiWork() override { wait_unless_unwinding(); }
  void wait() override {
    if (done_) return;
    done_ = true;
    c_.wait(req, op_);
    if (finish) finish();
    keep_.clear();
  }
  MPI_Request req = MPI_REQUEST_NULL;
  std::function<void()> finish;

 private:
  MpiCommunicator& c_;
  const char* op_;
  std::vector<torch::Tensor> keep_;
  bool done_ = false;
};

void divide_by(torch::Tensor& t, int n) {
  if (t.is_floating_point())
    t.div_(n);
  else
    t.div_(n, "floor");
}

}  // namespace

WorkPtr MpiCommunicator::start_all_reduce(torch::Tensor t, ReduceOp op) {
  require_cpu_contiguous(t, *this, "all_reduce");
  // Half types are reduced in an fp32 stand-in (MPI has no arithmetic for them), copied back when done.
  torch::Tensor buf = is_half(t.scalar_type()) ? t.to(torch::kFloat32) : t;
  MPI_Datatype type = mpi_type(buf.scalar_type());
  MEGATON_CHECK(type != MPI_DATATYPE_NULL, InternalError, "all_reduce: unsupported dtype ", t.scalar_type());
  auto w = std::make_unique<MpiWork>(*this, "all_reduce", std::vector<torch::Tensor>{t, buf});
  check(MPI_Iallreduce(MPI_IN_PLACE, buf.data_ptr(), static_cast<int>(buf.numel()), type, mpi_op(op), comm_, &w->req),
        "all_reduce");
  const int n = size_;
  w->finish = [t, buf, op, n]() mutable {
    if (op == ReduceOp::kAvg) divide_by(buf, n);
    if (!buf.is_same(t)) t.copy_(buf);
  };
  return w;
}

void MpiCommunicator::all_reduce(torch::Tensor& t, ReduceOp op) {
  start_all_reduce(t, op)->wait();
}

WorkPtr MpiCommunicator::post_all_gather(torch::Tensor out, torch::Tensor in, bool into_scratch) {
  require_cpu_contiguous(out, *this, "all_gather");
  require_cpu_contiguous(in, *this, "all_gather");
  MEGATON_CHECK(out.numel() == in.numel() * size_ && out.scalar_type() == in.scalar_type(), InternalError,
                "all_gather on ", describe(), ": out has ", out.numel(), " elements, expected ", in.numel() * size_);
  const int bytes = static_cast<int>(in.numel() * in.element_size());
  torch::Tensor recv = into_scratch ? torch::empty_like(out) : out;
  auto w = std::make_unique<MpiWork>(*this, "all_gather", std::vector<torch::Tensor>{out, in, recv});
  check(MPI_Iallgather(in.data_ptr(), bytes, MPI_BYTE, recv.data_ptr(), bytes, MPI_BYTE, comm_, &w->req), "all_gather");
  if (into_scratch) w->finish = [out, recv]() mutable { out.copy_(recv); };
  return w;
}

WorkPtr MpiCommunicator::start_all_gather(torch::Tensor out, torch::Tensor in) {
  // Into a scratch buffer copied out by wait(): `out` changes at wait() only, as on NCCL and the staged path, so a
  // reader that skips the wait sees the old values every time rather than whatever MPI's progress has delivered.
  return post_all_gather(std::move(out), std::move(in), true);
}

void MpiCommunicator::all_gather(torch::Tensor& out, const torch::Tensor& in) {
  post_all_gather(out, in, false)->wait();
}

WorkPtr MpiCommunicator::start_reduce_scatter(torch::Tensor out, torch::Tensor in, ReduceOp op) {
  require_cpu_contiguous(out, *this, "reduce_scatter");
  require_cpu_contiguous(in, *this, "reduce_scatter");
  MEGATON_CHECK(in.numel() == out.numel() * size_ && out.scalar_type() == in.scalar_type(), InternalError,
                "reduce_scatter on ", describe(), ": in has ", in.numel(), " elements, expected ", out.numel() * size_);
  const bool half = is_half(in.scalar_type());
  torch::Tensor fin = half ? in.to(torch::kFloat32) : in;
  torch::Tensor fout = half ? torch::empty(out.sizes(), out.options().dtype(torch::kFloat32)) : out;
  MPI_Datatype type = mpi_type(fin.scalar_type());
  MEGATON_CHECK(type != MPI_DATATYPE_NULL, InternalError, "reduce_scatter: unsupported dtype ", in.scalar_type());
  auto w = std::make_unique<MpiWork>(*this, "reduce_scatter", std::vector<torch::Tensor>{out, in, fin, fout});
  check(MPI_Ireduce_scatter_block(fin.data_ptr(), fout.data_ptr(), static_cast<int>(fout.numel()), type, mpi_op(op),
                                  comm_, &w->req),
        "reduce_scatter");
  const int n = size_;
  w->finish = [out, fout, op, n]() mutable {
    if (op == ReduceOp::kAvg) divide_by(fout, n);
    if (!fout.is_same(out)) out.copy_(fout);
  };
  return w;
}

void MpiCommunicator::reduce_scatter(torch::Tensor& out, const torch::Tensor& in, ReduceOp op) {
  start_reduce_scatter(out, in, op)->wait();
}

void MpiCommunicator::broadcast(torch::Tensor& t, int root) {
  require_cpu_contiguous(t, *this, "broadcast");
  MPI_Request req;
  check(MPI_Ibcast(t.data_ptr(), static_cast<int>(t.numel() * t.element_size()), MPI_BYTE, root, comm_, &req),
        "broadcast");
  wait(req, "broadcast");
}

void MpiCommunicator::send(const torch::Tensor& t, int peer) {
  require_cpu_contiguous(t, *this, "send");
  MPI_Request req;
  check(MPI_Isend(t.data_ptr(), static_cast<int>(t.numel() * t.element_size()), MPI_BYTE, peer, 0, comm_, &req),
        "send");
  wait(req, "send");
}

void MpiCommunicator::recv(torch::Tensor& t, int peer) {
  require_cpu_contiguous(t, *this, "recv");
  MPI_Request req;
  check(MPI_Irecv(t.data_ptr(), static_cast<int>(t.numel() * t.element_size()), MPI_BYTE, peer, 0, comm_, &req),
        "recv");
  wait(req, "recv");
}

void MpiCommunicator::send_recv(const torch::Tensor& send, int send_peer, torch::Tensor& recv, int recv_peer) {
  MPI_Request reqs[2];
  int n = 0;
  if (recv.defined()) {
    require_cpu_contiguous(recv, *this, "send_recv");
    check(MPI_Irecv(recv.data_ptr(), static_cast<int>(recv.numel() * recv.element_size()), MPI_BYTE, recv_peer, 0,
                    comm_, &reqs[n++]),
          "send_recv");
  }
  if (send.defined()) {
    require_cpu_contiguous(send, *this, "send_recv");
    check(MPI_Isend(send.data_ptr(), static_cast<int>(send.numel() * send.element_size()), MPI_BYTE, send_peer, 0,
                    comm_, &reqs[n++]),
          "send_recv");
  }
  for (int i = 0; i < n; ++i) wait(reqs[i], "send_recv");
}

void MpiCommunicator::barrier() {
  MPI_Request req;
  check(MPI_Ibarrier(comm_, &req), "barrier");
  wait(req, "barrier");
}

}  // namespace megaton::dist
