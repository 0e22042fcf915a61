// StepStream and StepGraph on ATen's CUDAGraph: captured on the StepStream's side stream (a capture cannot use the
// legacy default stream), activations in the graph's private memory pool, replayed on the same stream.
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include "core/error.h"
#include "train/step_graph.h"

namespace megaton::train {

struct StepStream::Impl {
  Impl(bool high_priority, int device)
      : side(c10::cuda::getStreamFromPool(high_priority, static_cast<c10::DeviceIndex>(device))), current(side) {}
  c10::cuda::CUDAStream side;
  c10::cuda::CUDAStreamGuard current;  // also makes the stream's device the current one
};

StepStream::StepStream(bool high_priority, int device) : impl_(std::make_unique<Impl>(high_priority, device)) {}
StepStream::~StepStream() {
  try {
    impl_->side.synchronize();  // what the run queued is done before the earlier stream is current again
  } catch (const std::exception&) {
  }
}

namespace {

[[noreturn]] void throw_capture_failed(const std::exception& e) {
  (void)cudaGetLastError();
  throw RuntimeError(std::string("--cuda-graph: capturing the training step failed (run without --cuda-graph): ") +
                     e.what());
}

// An invalidated capture's end throws before it stops routing the allocator into the graph's pool: stop it here (a
// no-op error when the end got that far).
template <class PoolId>
void stop_routing_to_pool(c10::DeviceIndex device, PoolId pool) {
  try {
    c10::cuda::CUDACachingAllocator::endAllocateToPool(device, pool);
  } catch (const std::exception&) {
  }
}

}  // namespace

struct StepGraph::Impl {
  std::unique_ptr<at::cuda::CUDAGraph> graph;
};

StepGraph::StepGraph() : impl_(std::make_unique<Impl>()) {}
StepGraph::~StepGraph() = default;

void StepGraph::capture(const StepGraphKey& key, const std::function<void()>& enqueue) {
  held_ = false;
  impl_->graph.reset();
  const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream();
  MEGATON_CHECK(stream != c10::cuda::getDefaultCUDAStream(stream.device_index()), RuntimeError,
                "--cuda-graph: the capture needs the run on a side stream (a StepStream), not the default stream");
  // The eager iterations' cached blocks go back to the driver once the device is idle: the graph's pool holds the
  // activations from now on.
  c10::cuda::device_synchronize();
  c10::cuda::CUDACachingAllocator::emptyCache();
  auto graph = std::make_unique<at::cuda::CUDAGraph>();
  const auto pool = at::cuda::graph_pool_handle();  // known here: CUDAGraph::pool() throws after a failed capture
  // Thread-local capture mode: only this thread is barred from calls that would break the capture (a host sync, a
  // query of an event). The NCCL watchdog polls its events every 100 ms on its own thread: in the global mode such a
  // poll during the capture invalidated it (the 1.3B step's capture, ~0.25 s, met one: CUBLAS_STATUS_EXECUTION_FAILED
  // on the invalidated stream). The autograd engine's thread only queues kernels on the captured stream.
  graph->capture_begin(pool, cudaStreamCaptureModeThreadLocal);
  try {
    enqueue();
  } catch (const std::exception& e) {
    try {
      graph->capture_end();  // ends the capture (invalidated)
    } catch (const std::exception&) {
      stop_routing_to_pool(stream.device_index(), pool);
    }
    throw_capture_failed(e);
  }
  try {
    graph->capture_end();
  } catch (const std::exception& e) {
    stop_routing_to_pool(stream.device_index(), pool);
    throw_capture_failed(e);
  }
  impl_->graph = std::move(graph);
  key_ = key;
  held_ = true;
  ++captures_;
}

void StepGraph::replay() {
  MEGATON_ASSERT(held_ && impl_->graph, "StepGraph::replay without a capture");
  impl_->graph->replay();
}

}  // namespace megaton::train
