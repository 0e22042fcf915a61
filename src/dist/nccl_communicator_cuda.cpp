#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <iostream>

#include "core/error.h"
#include "dist/mpi_session.h"
#include "dist/nccl_communicator.h"

namespace megaton::dist {
namespace {

#define NCCL_CHECK(expr, what)                                                                                        \
  do {                                                                                                                \
    ncclResult_t r_ = (expr);                                                                                         \
    if (r_ != ncclSuccess)                                                                                            \
      throw CommError(str(what, " on ", describe(), ": NCCL error '", ncclGetErrorString(r_), "'", last_nccl_error(), \
                          " at ", __FILE__, ":", __LINE__));                                                          \
  } while (0)

/// NCCL's own explanation of its last failure ("Duplicate GPU detected : rank 1 and rank 0 both on CUDA device
/// 1a000"), as " (...)", or "" where this NCCL cannot say.
std::string last_nccl_error() {
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0)
  const char* e = ncclGetLastError(nullptr);
  if (e != nullptr && *e != '\0') return ::megaton::str(" (", e, ")");
#endif
  return "";
}

/// "cuda:0 (PCI 0000:1A:00.0) of 1 visible", for errors about which GPU a rank drives.
std::string gpu_description(int device) {
  char bus[32] = "?";
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus), device) != cudaSuccess) bus[0] = '?', bus[1] = '\0';
  int visible = 0;
  cudaGetDeviceCount(&visible);
  return ::megaton::str("cuda:", device, " (PCI ", bus, ") of ", visible, " visible");
}

ncclDataType_t nccl_type(c10::ScalarType t) {
  switch (t) {
    case torch::kFloat32:
      return ncclFloat32;
    case torch::kFloat64:
      return ncclFloat64;
    case torch::kFloat16:
      return ncclFloat16;
    case torch::kBFloat16:
      return ncclBfloat16;
    case torch::kInt32:
      return ncclInt32;
    case torch::kInt64:
      return ncclInt64;
    case torch::kUInt8:
    case torch::kBool:
      return ncclUint8;
    case torch::kInt8:
      return ncclInt8;
    default:
      throw InternalError(
          ::megaton::str("NCCL: unsupported dtype ", c10::toString(t)));  // ::megaton: c10::str is found by ADL
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAvg:
      return ncclAvg;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
  }
  return ncclSum;
}

cudaStream_t current_stream() {
  return c10::cuda::getCurrentCUDAStream().stream();
}

// A started op: its completion event on the comm stream and the tensors it uses.
class NcclWork : public Work {
 public:
  NcclWork(cudaEvent_t done, std::vector<torch::Tensor> keep) : done_(done), keep_(std::move(keep)) {}
  ~NcclWork() override { wait(); }
  void wait() override {
    if (done_ == nullptr) return;
    // Work queued on the current stream from here on sees the results; the tensors' memory, freed below, is reused
    // only by such work.
    cudaStreamWaitEvent(current_stream(), done_, 0);
    cudaEventDestroy(done_);
    done_ = nullptr;
    keep_.clear();
  }

 private:
  cudaEvent_t done_;
  std::vector<torch::Tensor> keep_;
};

}  // namespace

struct NcclCommunicator::Pending {
  cudaEvent_t event;
  const char* op;
  std::chrono::steady_clock::time_point start;
};

NcclCommunicator::NcclCommunicator(std::shared_ptr<MpiCommunicator> mpi, double timeout_s)
    : mpi_(std::move(mpi)), timeout_s_(timeout_s) {
  cudaGetDevice(&device_);
  ncclUniqueId id;
  if (mpi_->rank() == 0) NCCL_CHECK(ncclGetUniqueId(&id), "ncclGetUniqueId");
  torch::Tensor buf = torch::from_blob(&id, {static_cast<int64_t>(sizeof(id))}, torch::kUInt8);
  mpi_->broadcast(buf, 0);
  ncclComm_t comm;
  const ncclResult_t rc = ncclCommInitRank(&comm, mpi_->size(), id, mpi_->rank());
  if (rc == ncclInvalidUsage) {
    // The usual cause: more ranks on a node than GPUs, so two ranks of one group share a device.
    throw CommError(str("ncclCommInitRank on ", describe(), ": NCCL error '", ncclGetErrorString(rc), "'",
                        last_nccl_error(), ". This rank drives ", gpu_description(device_),
                        "; NCCL needs a GPU of its own for every rank of a group: start at most one rank per GPU on "
                        "each node (mpirun -np / srun --ntasks-per-node), or use --distributed-backend mpi with "
                        "--device cpu"));
  }
  NCCL_CHECK(rc, "ncclCommInitRank");
  comm_ = comm;
  int least = 0, greatest = 0;
  cudaDeviceGetStreamPriorityRange(&least, &greatest);
  cudaStream_t stream;
  cudaEvent_t ready, done;
  MEGATON_CHECK(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, greatest) == cudaSuccess &&
                    cudaEventCreateWithFlags(&ready, cudaEventDisableTiming) == cudaSuccess &&
                    cudaEventCreateWithFlags(&done, cudaEventDisableTiming) == cudaSuccess,
                CommError, "NCCL communicator ", describe(), ": cannot create its CUDA stream and events");
  comm_stream_ = stream;
  ready_ = ready;
  started_done_ = done;
  watchdog_ = std::thread([this] { watchdog_loop(); });
}

NcclCommunicator::~NcclCommunicator() {
  stop_ = true;
  cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  for (auto& p : pending_) cudaEventDestroy(p->event);
  if (comm_stream_) cudaStreamSynchronize(static_cast<cudaStream_t>(comm_stream_));
  if (comm_) ncclCommDestroy(static_cast<ncclComm_t>(comm_));
  if (ready_) cudaEventDestroy(static_cast<cudaEvent_t>(ready_));
  if (started_done_) cudaEventDestroy(static_cast<cudaEvent_t>(started_done_));
  if (comm_stream_) cudaStreamDestroy(static_cast<cudaStream_t>(comm_stream_));
}

void* NcclCommunicator::blocking_stream() {
  cudaStream_t s = current_stream();
  if (started_in_flight_) {
    cudaStreamWaitEvent(s, static_cast<cudaEvent_t>(started_done_), 0);
    started_in_flight_ = false;
  }
  return s;
}

void* NcclCommunicator::begin_started() {
  cudaEventRecord(static_cast<cudaEvent_t>(ready_), current_stream());
  cudaStreamWaitEvent(static_cast<cudaStream_t>(comm_stream_), static_cast<cudaEvent_t>(ready_), 0);
  return comm_stream_;
}

WorkPtr NcclCommunicator::end_started(const char* op, std::vector<torch::Tensor> keep) {
  auto stream = static_cast<cudaStream_t>(comm_stream_);
  track(op, stream);
  cudaEvent_t done;
  MEGATON_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming) == cudaSuccess, CommError, op, " on ",
                describe(), ": cannot create a CUDA event");
  cudaEventRecord(done, stream);
  cudaEventRecord(static_cast<cudaEvent_t>(started_done_), stream);
  started_in_flight_ = true;
  return std::make_unique<NcclWork>(done, std::move(keep));
}

void NcclCommunicator::track(const char* op, void* stream) {
  if (timeout_s_ <= 0) return;
  auto p = std::make_unique<Pending>();
  cudaEventCreateWithFlags(&p->event, cudaEventDisableTiming);
  cudaEventRecord(p->event, static_cast<cudaStream_t>(stream));
  p->op = op;
  p->start = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  pending_.push_back(std::move(p));
  cv_.notify_all();
}

void NcclCommunicator::watchdog_loop() {
  cudaSetDevice(device_);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    while (!pending_.empty()) {
      Pending& p = *pending_.front();
      if (cudaEventQuery(p.event) == cudaSuccess) {
        cudaEventDestroy(p.event);
        pending_.pop_front();
        continue;
      }
      const double age = std::chrono::duration<double>(std::chrono::steady_clock::now() - p.start).count();
      ncclResult_t async_err = ncclSuccess;
      ncclCommGetAsyncError(static_cast<ncclComm_t>(comm_), &async_err);
      if (age > timeout_s_ || async_err != ncclSuccess) {
        std::cerr << "megaton: NCCL " << p.op << " on " << describe()
                  << (async_err != ncclSuccess ? str(" failed: ", ncclGetErrorString(async_err))
                                               : str(" did not complete within ", timeout_s_, " s"))
                  << "; aborting the job (exit code " << static_cast<int>(ExitCode::kComm) << ")" << std::endl;
        ncclCommAbort(static_cast<ncclComm_t>(comm_));
        MpiSession::abort_job(static_cast<int>(ExitCode::kComm));
      }
      break;
    }
  }
}

// The enqueueing of each collective on a given stream, shared by the blocking and the started forms.
void NcclCommunicator::enqueue_all_reduce(torch::Tensor& t, ReduceOp op, void* stream) {
  NCCL_CHECK(ncclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(), nccl_type(t.scalar_type()), nccl_op(op),
                           static_cast<ncclComm_t>(comm_), static_cast<cudaStream_t>(stream)),
             "all_reduce");
}

void NcclCommunicator::enqueue_all_gather(torch::Tensor& out, const torch::Tensor& in, void* stream) {
  MEGATON_CHECK(out.numel() == in.numel() * size(), InternalError, "all_gather on ", describe(), ": size mismatch");
  NCCL_CHECK(ncclAllGather(in.data_ptr(), out.data_ptr(), in.numel(), nccl_type(in.scalar_type()),
                           static_cast<ncclComm_t>(comm_), static_cast<cudaStream_t>(stream)),
             "all_gather");
}

void NcclCommunicator::enqueue_reduce_scatter(torch::Tensor& out, const torch::Tensor& in, ReduceOp op, void* stream) {
  MEGATON_CHECK(in.numel() == out.numel() * size(), InternalError, "reduce_scatter on ", describe(), ": size mismatch");
  NCCL_CHECK(ncclReduceScatter(in.data_ptr(), out.data_ptr(), out.numel(), nccl_type(in.scalar_type()), nccl_op(op),
                               static_cast<ncclComm_t>(comm_), static_cast<cudaStream_t>(stream)),
             "reduce_scatter");
}

void NcclCommunicator::all_reduce(torch::Tensor& t, ReduceOp op) {
  void* s = blocking_stream();
  enqueue_all_reduce(t, op, s);
  track("all_reduce", s);
}

void NcclCommunicator::all_gather(torch::Tensor& out, const torch::Tensor& in) {
  void* s = blocking_stream();
  enqueue_all_gather(out, in, s);
  track("all_gather", s);
}

void NcclCommunicator::reduce_scatter(torch::Tensor& out, const torch::Tensor& in, ReduceOp op) {
  void* s = blocking_stream();
  enqueue_reduce_scatter(out, in, op, s);
  track("reduce_scatter", s);
}

WorkPtr NcclCommunicator::start_all_reduce(torch::Tensor t, ReduceOp op) {
  enqueue_all_reduce(t, op, begin_started());
  return end_started("all_reduce", {t});
}

WorkPtr NcclCommunicator::start_all_gather(torch::Tensor out, torch::Tensor in) {
  enqueue_all_gather(out, in, begin_started());
  return end_started("all_gather", {out, in});
}

WorkPtr NcclCommunicator::start_reduce_scatter(torch::Tensor out, torch::Tensor in, ReduceOp op) {
  enqueue_reduce_scatter(out, in, op, begin_started());
  return end_started("reduce_scatter", {out, in});
}

void NcclCommunicator::broadcast(torch::Tensor& t, int root) {
  auto s = static_cast<cudaStream_t>(blocking_stream());
  NCCL_CHECK(ncclBroadcast(t.data_ptr(), t.data_ptr(), t.numel(), nccl_type(t.scalar_type()), root,
                           static_cast<ncclComm_t>(comm_), s),
             "broadcast");
  track("broadcast", s);
}

void NcclCommunicator::send(const torch::Tensor& t, int peer) {
  auto s = static_cast<cudaStream_t>(blocking_stream());
  NCCL_CHECK(ncclSend(t.data_ptr(), t.numel(), nccl_type(t.scalar_type()), peer, static_cast<ncclComm_t>(comm_), s),
             "send");
  track("send", s);
}

void NcclCommunicator::recv(torch::Tensor& t, int peer) {
  auto s = static_cast<cudaStream_t>(blocking_stream());
  NCCL_CHECK(ncclRecv(t.data_ptr(), t.numel(), nccl_type(t.scalar_type()), peer, static_cast<ncclComm_t>(comm_), s),
             "recv");
  track("recv", s);
}

void NcclCommunicator::send_recv(const torch::Tensor& send, int send_peer, torch::Tensor& recv, int recv_peer) {
  auto s = static_cast<cudaStream_t>(blocking_stream());
  NCCL_CHECK(ncclGroupStart(), "send_recv");
  if (send.defined())
    NCCL_CHECK(ncclSend(send.data_ptr(), send.numel(), nccl_type(send.scalar_type()), send_peer,
                        static_cast<ncclComm_t>(comm_), s),
               "send_recv");
  if (recv.defined())
    NCCL_CHECK(ncclRecv(recv.data_ptr(), recv.numel(), nccl_type(recv.scalar_type()), recv_peer,
                        static_cast<ncclComm_t>(comm_), s),
               "send_recv");
  NCCL_CHECK(ncclGroupEnd(), "send_recv");
  track("send_recv", s);
}

void NcclCommunicator::barrier() {
  // A one-element all-reduce on the stream, then wait for the stream: every earlier op of this group is done too.
  torch::Tensor one = torch::ones({1}, torch::TensorOptions().device(torch::kCUDA, device_));
  all_reduce(one, ReduceOp::kSum);
  cudaStreamSynchronize(current_stream());
}

}  // namespace megaton::dist
