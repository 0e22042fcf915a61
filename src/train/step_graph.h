// --cuda-graph: a training step's forward and backward (every micro-batch, and the mean of their losses) captured once
// as a CUDA graph and replayed in each iteration after it: the step's ~700 kernel launches (GPT-2 124M) become one
// graph launch, so the GPU does not wait for a host that queues kernels slower than it runs them (measured on an H200
// with a fast host: no gain at 124M or 1.3B, docs/training.md). The optimizer stays eager (a handful of launches; its
// learning rate and step count change every iteration).
//
// What a replay reads and writes lives at addresses fixed at capture: the micro-batches are copied into the captured
// input tensors (the trainer's), the parameters and fp32 main grads are DataParallel's flat buffers, the activations
// come from the graph's private memory pool. Host state the captured code changed (the autograd hooks' bucket counts,
// the main grads' first-write flags) is not changed by a replay: the trainer restores it after each one
// (DataParallel::restore_step_state). A new capture is made when the step's shape changes (the number of
// micro-batches under --rampup-batch-size, the loss scale under dynamic fp16 loss scaling).
//
// The whole run queues its GPU work on one side stream (StepStream, made current before the model is built): a capture
// cannot use the legacy default stream, the autograd nodes that accumulate into the parameters keep the stream they
// were created on (the DP hooks hold them), and cuDNN and cuBLAS set up their per-stream state in the eager
// iteration, not during the capture.
//
// Where it applies: one CUDA rank (TP = PP = DP = 1), no dropout, no --checkpoint-activations, no --gemm-autotune
// (cuda_graph_unsupported says which does not hold). The first iteration of a run is eager (lazy initialisations:
// cuBLAS/cuDNN plans, workspaces), the second is captured and replayed.
#pragma once
#include <functional>
#include <memory>
#include <string>

namespace megaton::train {

struct TrainConfig;

/// What a captured step depends on beyond its inputs' values.
struct StepGraphKey {
  int micro_batches = 0;
  double loss_scale = 1.0;
  bool operator==(const StepGraphKey& o) const {
    return micro_batches == o.micro_batches && loss_scale == o.loss_scale;
  }
};

/// Why `cfg` cannot use --cuda-graph on this run ("" when it can): `cuda` is whether the model runs on a GPU,
/// `world_size` the number of ranks.
std::string cuda_graph_unsupported(const TrainConfig& cfg, bool cuda, int world_size);

/// For its lifetime, the current CUDA stream of the calling thread is a side stream from ATen's pool (not the legacy
/// default stream, which no capture may touch). The destructor waits for the side stream's work, then restores the
/// earlier stream. Without CUDA the constructor throws UsageError. `high_priority`: a stream of the device's highest
/// priority, whose kernels' blocks the GPU schedules before those of default-priority streams (--overlap-optimizer-step
/// runs the training on one, so that the update queued on a default-priority stream fills the gaps of the forward
/// instead of delaying it). `device`: the CUDA device's index (-1: the current device).
class StepStream {
 public:
  explicit StepStream(bool high_priority = false, int device = -1);
  ~StepStream();
  StepStream(const StepStream&) = delete;
  StepStream& operator=(const StepStream&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class StepGraph {
 public:
  StepGraph();
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  /// True when a capture for `key` is held.
  bool holds(const StepGraphKey& key) const;
  /// Drops any earlier capture, waits for the device to finish its queued work, then captures what `enqueue` queues
  /// on the current stream, which must be a StepStream's (nothing runs: replay() runs it). RuntimeError naming
  /// --cuda-graph when the capture fails (something in the step synchronised with the host or used another stream).
  void capture(const StepGraphKey& key, const std::function<void()>& enqueue);
  /// Queues the captured work on the current stream.
  void replay();
  /// Captures made so far (a new one per change of key).
  int captures() const { return captures_; }

 private:
  struct Impl;  // the CUDA graph (step_graph_cuda.cpp; without CUDA, capture throws)
  std::unique_ptr<Impl> impl_;
  StepGraphKey key_;
  bool held_ = false;
  int captures_ = 0;
};

}  // namespace megaton::train
