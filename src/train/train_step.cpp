#include "train/train_step.h"

#include "core/error.h"
#include "data/sample_dataset.h"

namespace megaton::train {

TrainStep::TrainStep(Parts parts, Options options) : p_(parts), o_(std::move(options)) {}

bool TrainStep::reads_data() const {
  return p_.model.holds_embedding() || p_.model.holds_loss() || o_.documents_on_every_stage;
}

StepOutcome TrainStep::run(const TrainingProgress& progress, bool log_point, int seq_length) {
  StepOutcome s;
  s.seq_length = seq_length;
  BatchOptions batch = o_.batch;
  batch.seq_length = seq_length;
  p_.micro_batches.update(progress.consumed_train_samples, true);
  const int m = static_cast<int>(p_.micro_batches.num_micro_batches());
  s.global_batch = p_.micro_batches.current_global_batch_size();

  // This DP rank's micro-batches of the global batch (Megatron's pretraining sampler, from consumed samples).
  p_.timers("batch-generator").start();
  const int64_t position = progress.consumed_train_samples + progress.skipped_train_samples;
  data::PretrainingSampler sampler(p_.dataset.size(), position, o_.micro_batch_size, p_.groups.coords.dp,
                                   p_.groups.grid.dp_size());
  const bool needs_data = reads_data();
  std::vector<model::MicroBatch> batches(static_cast<size_t>(m));
  for (int i = 0; i < m; ++i) {
    std::vector<int64_t> idx;
    MEGATON_CHECK(sampler.next(idx), DataError, "the train dataset ran out of samples at sample ", position, " (",
                  p_.dataset.size(), " samples in the index)");
    if (needs_data) batches[static_cast<size_t>(i)] = make_micro_batch(p_.dataset, idx, batch);
  }
  p_.timers("batch-generator").stop();

  p_.optimizer.zero_grad();
  const double scale = p_.optimizer.loss_scale();
  std::vector<torch::Tensor> losses;  // [] each, on the device: read once after the schedule, no sync per micro-batch
  auto forward = [&](int chunk, int mb, const torch::Tensor& input) -> torch::Tensor {
    torch::Tensor out = p_.model.forward_step(chunk, batches[static_cast<size_t>(mb)], input);
    if (!p_.model.is_last_stage(chunk)) return out;
    losses.push_back(out.detach());
    return out * (scale / m);
  };
  // The DP hooks start a bucket's reduction once every parameter in it has its last gradient: each chunk's last
  // backward is micro-batch M - 1 (chunks finish at different times; a bucket holding parameters of several chunks
  // waits for all of them, and finish_grad_sync, after the schedule, reduces whatever is left).
  auto before_backward = [&](int, int mb) { p_.dp.set_last_microbatch(mb == m - 1); };
  p_.timers("forward-backward").start();
  p_.model.run_schedule(m, o_.micro_batch_size, seq_length, forward, before_backward, false);
  p_.model.update_fp8_scaling();
  // average_losses_across_data_parallel_group's local part, on the device (fp64 mean): [1]
  const torch::Tensor loss =
      p_.model.holds_loss() ? torch::stack(losses).to(torch::kFloat64).mean().reshape({1}) : torch::Tensor();
  p_.timers("forward-backward").stop();

  if (p_.model.holds_loss()) {
    // Averaged over DP (fp32 over NCCL) before the step: a DP collective queued after it would wait for the
    // overlapped parameter all-gather the step starts. The host reads it after the next log line, not here.
    torch::Tensor l = p_.model.config().device.is_cuda() ? loss.to(torch::kFloat32) : loss.clone();
    p_.groups.dp->all_reduce(l, dist::ReduceOp::kAvg);
    s.loss = l;
  }
  p_.timers("optimizer").start();
  if (o_.sync_tp_duplicated_parameters) {
    p_.dp.finish_grad_sync();
    p_.dp.average_tp_replicated_grads(*p_.groups.tp);
  }
  const auto r = p_.optimizer.step(/*want_zero_count=*/log_point);
  p_.timers("optimizer").stop();
  s.updated = r.updated;
  s.grad_norm = r.grad_norm;
  s.num_zeros = r.num_zeros;
  return s;
}

}  // namespace megaton::train
