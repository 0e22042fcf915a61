#include "model/train_step.h"

#include "core/error.h"
#include "ops/attention.h"

namespace megaton::model {

StepLoss forward_backward_no_pipeline(GptStage& stage, const std::vector<MicroBatch>& batches, double loss_scale) {
  MEGATON_ASSERT(stage.is_first_stage() && stage.is_last_stage(),
                 "forward_backward_no_pipeline needs the whole model on one stage (PP = 1)");
  MEGATON_CHECK(!batches.empty(), InternalError, "a training step needs at least one micro-batch");
  StepLoss out;
  out.micro_batches = static_cast<int>(batches.size());
  const double n = static_cast<double>(batches.size());
  for (const auto& mb : batches) {
    torch::Tensor losses = stage.forward_losses(mb.tokens, mb.labels, mb.position_ids, mb.documents.per_forward());
    torch::Tensor loss = GptStage::masked_mean(losses, mb.loss_mask);  // []
    (loss * (loss_scale / n)).backward();
    out.loss += loss.item<double>() / n;
  }
  return out;
}

}  // namespace megaton::model
