#include "train/validation.h"

#include "core/error.h"
#include "data/sample_dataset.h"

namespace megaton::train {

Validation::Validation(TrainingModel& model, std::vector<data::NamedDataset> datasets,
                       optim::NumMicroBatchesCalculator& micro_batches, const dist::ProcessGroups& groups,
                       IterationLog& log, Options options)
    : model_(model),
      datasets_(std::move(datasets)),
      micro_batches_(micro_batches),
      groups_(groups),
      log_(log),
      o_(std::move(options)) {}

std::optional<double> Validation::run(TrainingProgress& progress) {
  std::optional<double> first;
  const int64_t start = progress.consumed_valid_samples;
  for (size_t k = 0; k < datasets_.size(); ++k) {
    progress.consumed_valid_samples = start;
    const auto loss = run_dataset(datasets_[k], progress);
    if (k == 0) first = loss;
  }
  return first;
}

std::optional<double> Validation::run_dataset(const data::NamedDataset& valid, TrainingProgress& progress) {
  if (!valid.data || o_.eval_iters <= 0) return std::nullopt;
  const data::SampleDataset& valid_ds = *valid.data;
  model_.set_training(false);
  const int m = static_cast<int>(micro_batches_.num_micro_batches());
  const int dp_rank = groups_.coords.dp, dp_size = groups_.grid.dp_size();
  double total = 0;
  int64_t n = 0;
  for (int64_t it = 0; it < o_.eval_iters; ++it) {
    data::PretrainingSampler sampler(valid_ds.size(),
                                     progress.consumed_valid_samples % std::max<int64_t>(valid_ds.size(), 1),
                                     o_.micro_batch_size, dp_rank, dp_size);
    std::vector<model::MicroBatch> batches(static_cast<size_t>(m));
    for (int i = 0; i < m; ++i) {
      std::vector<int64_t> idx;
      if (!sampler.next(idx)) {  // wrap around a small valid split
        sampler = data::PretrainingSampler(valid_ds.size(), 0, o_.micro_batch_size, dp_rank, dp_size);
        MEGATON_CHECK(sampler.next(idx), DataError, "the validation split holds fewer than one global batch of ",
                      "micro-batches (", valid_ds.size(), " samples)");
      }
      if (o_.reads_data) batches[static_cast<size_t>(i)] = make_micro_batch(valid_ds, idx, o_.batch);
    }
    progress.consumed_valid_samples += micro_batches_.current_global_batch_size();
    auto forward = [&](int chunk, int mb, const torch::Tensor& input) -> torch::Tensor {
      torch::Tensor out = model_.forward_step(chunk, batches[static_cast<size_t>(mb)], input);
      if (!model_.is_last_stage(chunk)) return out;
      total += out.item<double>();
      ++n;
      return {};
    };
    model_.run_schedule(m, o_.micro_batch_size, model_.config().model.seq_length, forward, {}, true);
  }
  model_.set_training(true);
  if (!model_.holds_loss()) return std::nullopt;
  torch::Tensor l = torch::tensor({float(total / std::max<int64_t>(n, 1))}).to(model_.config().device);
  groups_.dp->all_reduce(l, dist::ReduceOp::kAvg);
  const double loss = l.to(torch::kCPU).item<double>();
  log_.validation(valid.name, loss, progress);
  return loss;
}

}  // namespace megaton::train
