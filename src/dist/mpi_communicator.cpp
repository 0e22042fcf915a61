#include "dist/mpi_communicator.h"

#include <chrono>
#include <exception>
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

void MpiCommunicator::all_reduce(torch::Tensor& t, ReduceOp op) {
  require_cpu_contiguous(t, *this, "all_reduce");
  if (is_half(t.scalar_type())) {
    torch::Tensor f = t.to(torch::kFloat32);
    all_reduce(f, op);
    t.copy_(f);
    return;
  }
  MPI_Datatype type = mpi_type(t.scalar_type());
  MEGATON_CHECK(type != MPI_DATATYPE_NULL, InternalError, "all_reduce: unsupported dtype ", t.scalar_type());
  MPI_Request req;
  check(MPI_Iallreduce(MPI_IN_PLACE, t.data_ptr(), static_cast<int>(t.numel()), type, mpi_op(op), comm_, &req),
        "all_reduce");
  wait(req, "all_reduce");
  if (op == ReduceOp::kAvg) {
    if (t.is_floating_point())
      t.div_(size_);
    else
      t.div_(size_, "floor");
  }
}

void MpiCommunicator::all_gather(torch::Tensor& out, const torch::Tensor& in) {
  require_cpu_contiguous(out, *this, "all_gather");
  require_cpu_contiguous(in, *this, "all_gather");
  MEGATON_CHECK(out.numel() == in.numel() * size_ && out.scalar_type() == in.scalar_type(), InternalError,
                "all_gather on ", describe(), ": out has ", out.numel(), " elements, expected ", in.numel() * size_);
  const int bytes = static_cast<int>(in.numel() * in.element_size());
  MPI_Request req;
  check(MPI_Iallgather(in.data_ptr(), bytes, MPI_BYTE, out.data_ptr(), bytes, MPI_BYTE, comm_, &req), "all_gather");
  wait(req, "all_gather");
}

void MpiCommunicator::reduce_scatter(torch::Tensor& out, const torch::Tensor& in, ReduceOp op) {
  require_cpu_contiguous(out, *this, "reduce_scatter");
  require_cpu_contiguous(in, *this, "reduce_scatter");
  MEGATON_CHECK(in.numel() == out.numel() * size_ && out.scalar_type() == in.scalar_type(), InternalError,
                "reduce_scatter on ", describe(), ": in has ", in.numel(), " elements, expected ", out.numel() * size_);
  if (is_half(in.scalar_type())) {
    torch::Tensor fo = torch::empty(out.sizes(), out.options().dtype(torch::kFloat32));
    reduce_scatter(fo, in.to(torch::kFloat32), op);
    out.copy_(fo);
    return;
  }
  MPI_Datatype type = mpi_type(in.scalar_type());
  MEGATON_CHECK(type != MPI_DATATYPE_NULL, InternalError, "reduce_scatter: unsupported dtype ", in.scalar_type());
  MPI_Request req;
  check(MPI_Ireduce_scatter_block(in.data_ptr(), out.data_ptr(), static_cast<int>(out.numel()), type, mpi_op(op), comm_,
                                  &req),
        "reduce_scatter");
  wait(req, "reduce_scatter");
  if (op == ReduceOp::kAvg) out.div_(size_);
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
