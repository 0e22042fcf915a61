#include "train/step_graph.h"

#include <sstream>

#include "core/error.h"
#include "train/train_config.h"

namespace megaton::train {

std::string cuda_graph_unsupported(const TrainConfig& cfg, bool cuda, int world_size) {
  std::ostringstream why;
  if (!cuda) why << "the model runs on the CPU (CUDA graphs need --device cuda and a CUDA build); ";
  if (world_size != 1)
    why << "the job has " << world_size << " ranks (captured collectives are not supported yet: TP = PP = DP = 1); ";
  if (cfg.model.hidden_dropout > 0 || cfg.model.attention_dropout > 0)
    why << "dropout is on (--hidden-dropout " << cfg.model.hidden_dropout << ", --attention-dropout "
        << cfg.model.attention_dropout << "; a replay would repeat the captured random masks); ";
  if (cfg.model.checkpoint_activations)
    why << "--checkpoint-activations restores RNG states on the host during the backward; ";
  if (cfg.model.gemm_autotune) why << "--gemm-autotune times GEMMs with events read on the host; ";
  if (cfg.data.reset_attention_mask)
    why << "--reset-attention-mask (a micro-batch has its own mask only where it holds a document boundary, so the "
           "step's kernels change from one iteration to the next); ";
  std::string s = why.str();
  if (s.size() >= 2) s.resize(s.size() - 2);
  return s;
}

bool StepGraph::holds(const StepGraphKey& key) const {
  return held_ && key_ == key;
}

#ifndef MEGATON_HAVE_CUDA
struct StepStream::Impl {};
StepStream::StepStream(bool, int) {
  throw UsageError("--cuda-graph, --overlap-optimizer-step: this megaton was built without CUDA");
}
StepStream::~StepStream() = default;

struct StepGraph::Impl {};
StepGraph::StepGraph() = default;
StepGraph::~StepGraph() = default;
void StepGraph::capture(const StepGraphKey&, const std::function<void()>&) {
  throw UsageError("--cuda-graph: this megaton was built without CUDA");
}
void StepGraph::replay() {
  throw UsageError("--cuda-graph: this megaton was built without CUDA");
}
#endif

}  // namespace megaton::train
