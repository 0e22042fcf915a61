#include "infer/stage_runner.h"

#include "core/error.h"

namespace megaton::infer {

StageRunner::StageRunner(model::GptStage& stage, const dist::ProcessGroups& groups) : stage_(stage), groups_(groups) {
  stage_.set_training(false);
}

torch::Tensor StageRunner::forward(const torch::Tensor& ids, model::KvCache* cache) {
  torch::NoGradGuard no_grad;
  MEGATON_CHECK(ids.dim() == 2, InternalError, "StageRunner::forward takes ids [b, s], got ", ids.sizes());
  const auto& c = stage_.config();
  dist::Communicator& pp = *groups_.pp;
  const int stage = pp.rank(), stages = pp.size();
  torch::Tensor input;
  if (stage == 0) {
    input = ids.to(c.device, torch::kInt64);  // [b, s]
  } else {
    input = torch::empty({ids.size(1), ids.size(0), c.hidden()},
                         torch::TensorOptions().dtype(c.residual_dtype()).device(c.device));  // [s, b, h]
    pp.recv(input, stage - 1);
  }
  torch::Tensor out = cache ? stage_.forward_cached(input, *cache) : stage_.forward(input);
  if (stage == stages - 1) return out;   // [s, b, V/tp]
  pp.send(out.contiguous(), stage + 1);  // [s, b, h]
  return {};
}

torch::Tensor StageRunner::gather_vocab(const torch::Tensor& parallel_logits) const {
  MEGATON_ASSERT(is_last_stage(), "gather_vocab on a stage that is not the last");
  return stage_.gather_logits(parallel_logits).narrow(-1, 0, stage_.config().vocab_size).to(torch::kFloat32);
}

void StageRunner::broadcast_from_last(torch::Tensor& t) const {
  if (is_last_stage() && groups_.tp->size() > 1) groups_.tp->broadcast(t, 0);
  if (groups_.pp->size() > 1) groups_.pp->broadcast(t, groups_.pp->size() - 1);
}

}  // namespace megaton::infer
