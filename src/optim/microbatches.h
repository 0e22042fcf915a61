// How many micro-batches make the current global batch (megatron/microbatches.py; reference inventory §7.2), and the
// number of iterations of sample-based training (training.py::update_train_iters).
//
// Constant: num_micro_batches = GBS / (MBS * DP).
// Ramp-up (--rampup-batch-size START INCR SAMPLES): increments = (GBS - START) / INCR, samples_per_increment =
// SAMPLES / increments (floating point); for consumed samples c: c > SAMPLES -> GBS, else START + int(c /
// samples_per_increment) * INCR. num_micro_batches = current global batch // (MBS * DP).
#pragma once
#include <cstdint>
#include <vector>

namespace megaton::optim {

class NumMicroBatchesCalculator {
 public:
  /// Constant batch size. Checks GBS % (MBS * DP) == 0.
  NumMicroBatchesCalculator(int64_t global_batch_size, int64_t micro_batch_size, int64_t data_parallel_size);
  /// Ramp-up from `start` by `increment` over `rampup_samples` samples (UsageError on the conditions Megatron asserts).
  NumMicroBatchesCalculator(int64_t start, int64_t increment, int64_t rampup_samples, int64_t global_batch_size,
                            int64_t micro_batch_size, int64_t data_parallel_size);

  /// Recomputes the batch for `consumed_samples`; with consistency_check the current batch must be a multiple of
  /// MBS * DP (UsageError otherwise).
  void update(int64_t consumed_samples, bool consistency_check);
  int64_t num_micro_batches() const { return num_micro_batches_; }
  int64_t current_global_batch_size() const { return current_global_batch_size_; }
  int64_t global_batch_size() const { return global_batch_size_; }
  bool rampup() const { return rampup_; }
  int64_t rampup_samples() const { return rampup_samples_; }

 private:
  bool rampup_ = false;
  int64_t micro_times_dp_;
  int64_t global_batch_size_;
  int64_t start_ = 0, increment_ = 0, rampup_samples_ = 0;
  double samples_per_increment_ = 0.0;
  int64_t current_global_batch_size_ = 0;
  int64_t num_micro_batches_ = 0;
};

/// A constant global batch, or with `rampup_batch_size` = {START, INCR, SAMPLES} (--rampup-batch-size) the ramp.
NumMicroBatchesCalculator make_num_micro_batches_calculator(int64_t global_batch_size, int64_t micro_batch_size,
                                                            const std::vector<int64_t>& rampup_batch_size,
                                                            int data_parallel_size);

/// update_train_iters: the number of iterations that --train-samples gives (the partial last batch is dropped). With
/// ramp-up it simulates the ramp (while consumed <= SAMPLES: consumed += current batch; iterations += 1) and adds
/// floor((train_samples - consumed) / GBS). Leaves `calc` at consumed = 0.
int64_t train_iters_for_samples(int64_t train_samples, NumMicroBatchesCalculator& calc);

}  // namespace megaton::optim
