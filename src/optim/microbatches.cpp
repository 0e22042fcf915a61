#include "optim/microbatches.h"

#include "core/error.h"

namespace megaton::optim {

NumMicroBatchesCalculator::NumMicroBatchesCalculator(int64_t gbs, int64_t mbs, int64_t dp)
    : micro_times_dp_(mbs * dp), global_batch_size_(gbs) {
  MEGATON_CHECK(mbs > 0 && dp > 0 && gbs > 0, UsageError, "batch sizes must be > 0 (global ", gbs, ", micro ", mbs,
                ", data-parallel ", dp, ")");
  MEGATON_CHECK(gbs % micro_times_dp_ == 0, UsageError, "--global-batch-size (", gbs,
                ") is not divisible by --micro-batch-size (", mbs, ") times data-parallel size (", dp, ")");
  current_global_batch_size_ = gbs;
  num_micro_batches_ = gbs / micro_times_dp_;
}

NumMicroBatchesCalculator::NumMicroBatchesCalculator(int64_t start, int64_t increment, int64_t rampup_samples,
                                                     int64_t gbs, int64_t mbs, int64_t dp)
    : rampup_(true),
      micro_times_dp_(mbs * dp),
      global_batch_size_(gbs),
      start_(start),
      increment_(increment),
      rampup_samples_(rampup_samples) {
  MEGATON_CHECK(mbs > 0 && dp > 0, UsageError, "micro batch size (", mbs, ") and data-parallel size (", dp,
                ") must be > 0");
  MEGATON_CHECK(start > 0, UsageError, "--rampup-batch-size START must be > 0, got ", start);
  MEGATON_CHECK(gbs > 0, UsageError, "--global-batch-size must be > 0, got ", gbs);
  MEGATON_CHECK(gbs >= start, UsageError, "--global-batch-size (", gbs, ") must be >= the ramp-up START (", start, ")");
  MEGATON_CHECK(increment > 0, UsageError, "--rampup-batch-size INCR must be > 0, got ", increment);
  MEGATON_CHECK((gbs - start) % increment == 0, UsageError, "--global-batch-size (", gbs, ") minus START (", start,
                ") must be divisible by INCR (", increment, ")");
  const int64_t increments = (gbs - start) / increment;
  // Megatron divides by zero here (ZeroDivisionError); say what is wrong instead.
  MEGATON_CHECK(increments > 0, UsageError, "--rampup-batch-size: START (", start,
                ") equals --global-batch-size; there is nothing to ramp (drop --rampup-batch-size)");
  MEGATON_CHECK(rampup_samples > 0, UsageError, "--rampup-batch-size SAMPLES must be > 0, got ", rampup_samples);
  samples_per_increment_ = static_cast<double>(rampup_samples) / static_cast<double>(increments);
  update(0, false);
}

void NumMicroBatchesCalculator::update(int64_t consumed_samples, bool consistency_check) {
  if (rampup_) {
    if (consumed_samples > rampup_samples_) {
      current_global_batch_size_ = global_batch_size_;
    } else {
      const auto steps = static_cast<int64_t>(static_cast<double>(consumed_samples) / samples_per_increment_);
      current_global_batch_size_ = start_ + steps * increment_;
      MEGATON_ASSERT(current_global_batch_size_ <= global_batch_size_, "ramp-up batch ", current_global_batch_size_);
    }
  }
  MEGATON_CHECK(!consistency_check || current_global_batch_size_ % micro_times_dp_ == 0, UsageError,
                "current global batch size (", current_global_batch_size_,
                ") is not divisible by micro-batch-size times data-parallel size (", micro_times_dp_, ")");
  num_micro_batches_ = current_global_batch_size_ / micro_times_dp_;
}

NumMicroBatchesCalculator make_num_micro_batches_calculator(int64_t global_batch_size, int64_t micro_batch_size,
                                                            const std::vector<int64_t>& rampup, int dp) {
  if (rampup.empty()) return NumMicroBatchesCalculator(global_batch_size, micro_batch_size, dp);
  MEGATON_CHECK(rampup.size() == 3, UsageError, "--rampup-batch-size expects 3 values (START INCR SAMPLES), got ",
                rampup.size());
  return NumMicroBatchesCalculator(rampup[0], rampup[1], rampup[2], global_batch_size, micro_batch_size, dp);
}

namespace {
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
}  // namespace

int64_t train_iters_for_samples(int64_t train_samples, NumMicroBatchesCalculator& calc) {
  if (!calc.rampup()) return floor_div(train_samples, calc.global_batch_size());
  int64_t iterations = 0, consumed = 0;
  while (consumed <= calc.rampup_samples()) {
    calc.update(consumed, false);
    consumed += calc.current_global_batch_size();
    iterations += 1;
  }
  calc.update(0, false);
  iterations += floor_div(train_samples - consumed, calc.global_batch_size());
  return iterations;
}

}  // namespace megaton::optim
