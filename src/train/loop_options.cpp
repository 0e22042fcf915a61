#include "train/loop_options.h"

#include "core/error.h"

namespace megaton::train {

void LoopOptions::validate(const parallel::ParallelOptions& p) {
  LoopOptions& t = *this;
  const int dp = p.data_parallel_size;
  MEGATON_CHECK(t.micro_batch_size > 0, UsageError, "--micro-batch-size is required and must be > 0 (got ",
                t.micro_batch_size, ")");
  if (t.global_batch_size == 0) t.global_batch_size = t.micro_batch_size * dp;
  MEGATON_CHECK(t.global_batch_size > 0, UsageError, "--global-batch-size must be > 0");
  MEGATON_CHECK(t.global_batch_size % (t.micro_batch_size * dp) == 0, UsageError, "--global-batch-size (",
                t.global_batch_size, ") must be divisible by --micro-batch-size x data-parallel size (",
                t.micro_batch_size, " x ", dp, " = ", t.micro_batch_size * dp, ")");
  t.num_micro_batches = t.global_batch_size / (t.micro_batch_size * dp);
  MEGATON_CHECK(t.train_tokens >= 0, UsageError, "--train-tokens must be > 0, got ", t.train_tokens);
  MEGATON_CHECK(!(t.train_iters > 0 && t.train_samples > 0), UsageError,
                "--train-iters and --train-samples are exclusive");
  if (!t.dry_run || t.train_iters > 0 || t.train_samples > 0) {
    MEGATON_CHECK(t.train_iters > 0 || t.train_samples > 0 || t.eval_only, UsageError,
                  "one of --train-iters or --train-samples is required");
  }
  if (t.train_iters > 0) {
    MEGATON_CHECK(t.rampup_batch_size.empty(), UsageError,
                  "--rampup-batch-size is only supported with --train-samples (sample-based training)");
  }
  if (!t.rampup_batch_size.empty()) {
    MEGATON_CHECK(t.rampup_batch_size.size() == 3, UsageError,
                  "--rampup-batch-size expects 3 values (START INCR SAMPLES), got ", t.rampup_batch_size.size());
    const int64_t start = t.rampup_batch_size[0], incr = t.rampup_batch_size[1], samples = t.rampup_batch_size[2];
    MEGATON_CHECK(start > 0 && incr > 0 && samples >= 0, UsageError,
                  "--rampup-batch-size: START and INCR must be > 0 and SAMPLES >= 0");
    MEGATON_CHECK(t.global_batch_size >= start, UsageError, "--global-batch-size (", t.global_batch_size,
                  ") must be >= the ramp-up start batch (", start, ")");
    MEGATON_CHECK((t.global_batch_size - start) % incr == 0, UsageError, "--global-batch-size (", t.global_batch_size,
                  ") minus the ramp-up start (", start, ") must be divisible by the increment (", incr, ")");
    MEGATON_CHECK(start % (t.micro_batch_size * dp) == 0 && incr % (t.micro_batch_size * dp) == 0, UsageError,
                  "--rampup-batch-size START (", start, ") and INCR (", incr,
                  ") must be divisible by --micro-batch-size x data-parallel size (", t.micro_batch_size * dp, ")");
  }
  if (p.interleaved()) {
    // Megatron's interleaved schedule runs the micro-batches in groups of PP per model chunk.
    const int pp = p.pipeline_model_parallel_size;
    const int64_t per = int64_t(t.micro_batch_size) * dp;
    std::vector<int64_t> batches{t.global_batch_size};
    if (t.rampup_batch_size.size() == 3)
      batches.insert(batches.end(), {t.rampup_batch_size[0], t.rampup_batch_size[1]});
    for (int64_t b : batches)
      MEGATON_CHECK((b / per) % pp == 0, UsageError,
                    "--num-layers-per-virtual-pipeline-stage (interleaved schedule) needs the number of micro-batches "
                    "per iteration to be a multiple of --pipeline-model-parallel-size (",
                    pp, "): ", b == t.global_batch_size ? "--global-batch-size" : "--rampup-batch-size", " ", b,
                    " / (--micro-batch-size x data-parallel size = ", per, ") = ", b / per, " micro-batches");
  }
  MEGATON_CHECK(t.log_interval > 0, UsageError, "--log-interval must be > 0");
  MEGATON_CHECK(t.eval_interval > 0, UsageError, "--eval-interval must be > 0");
  MEGATON_CHECK(t.max_nan_iterations >= 0, UsageError, "--max-nan-iterations must be >= 0 (0: never stop), got ",
                t.max_nan_iterations);
  MEGATON_CHECK(t.eval_iters >= 0, UsageError, "--eval-iters must be >= 0 (0: no validation), got ", t.eval_iters);
}

}  // namespace megaton::train
