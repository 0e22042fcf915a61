// StepGraph on ATen's CUDAGraph: captured on a side stream from the pool (a capture cannot use the default stream),
// activations in the graph's private memory pool, replayed on the current stream.
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include "core/error.h"
#include "train/step_graph.h"

namespace megaton::train {

struct StepGraph::Impl {
  std::unique_ptr<at::cuda::CUDAGraph> graph;
};

StepGraph::StepGraph() : impl_(std::make_unique<Impl>()) {}
StepGraph::~StepGraph() = default;

void StepGraph::capture(const StepGraphKey& key, const std::function<void()>& enqueue) {
  held_ = false;
  impl_->graph.reset();
  // The side stream starts from a drained device (it does not wait on the default stream's queue), and the eager
  // iterations' cached blocks go back to the driver: the graph's pool holds the activations from now on.
  c10::cuda::device_synchronize();
  c10::cuda::CUDACachingAllocator::emptyCache();
  auto graph = std::make_unique<at::cuda::CUDAGraph>();
  const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  {
    c10::cuda::CUDAStreamGuard on_side(side);
    graph->capture_begin();
    try {
      enqueue();
    } catch (const std::exception& e) {
      try {
        graph->capture_end();  // ends the capture (invalidated) and the allocator's routing to the graph's pool
      } catch (const std::exception&) {
      }
      (void)cudaGetLastError();
      throw RuntimeError(std::string("--cuda-graph: capturing the training step failed (run without --cuda-graph): ") +
                         e.what());
    }
    try {
      graph->capture_end();
    } catch (const std::exception& e) {
      (void)cudaGetLastError();
      throw RuntimeError(std::string("--cuda-graph: capturing the training step failed (run without --cuda-graph): ") +
                         e.what());
    }
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
