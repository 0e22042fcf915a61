// The learning-rate schedule, exactly Megatron's AnnealingLR (megatron/learning_rates.py; reference inventory §7.1).
// It counts *samples*: step(increment) is called after every successful optimizer step with the global batch size of
// that iteration, so warmup and decay are in samples whatever the batch-size ramp-up does.
//
//   n <= W (W > 0):       lr = max_lr * n / W                       (the first step runs at lr 0)
//   constant:             lr = max_lr
//   n > D:                lr = min_lr
//   otherwise:            r = (n - W) / (D - W); linear: c = 1 - r; cosine: c = (cos(pi r) + 1) / 2
//                         lr = min_lr + c * (max_lr - min_lr)
// With --lr-decay-tokens T the decay ratio uses consumed tokens instead: r = (tokens - warmup_tokens) /
// (T - warmup_tokens), warmup_tokens being the token count seen when n == W exactly (Megatron's behaviour, kept).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace megaton::optim {

struct LrSchedulerOptions {
  double max_lr = 0.0;
  double min_lr = 0.0;
  double warmup_steps = 0;              // samples; fractional when it comes from --lr-warmup-fraction, as in Megatron
  int64_t decay_steps = 0;              // samples
  std::string decay_style = "linear";   // constant | linear | cosine
  std::optional<int64_t> decay_tokens;  // --lr-decay-tokens
  bool override_lr_scheduler = false;
  bool use_checkpoint_lr_scheduler = false;
};

class AnnealingLR {
 public:
  /// Checks 0 <= min_lr <= max_lr, decay_steps > 0, warmup_steps < decay_steps (UsageError), then calls step(0, 0).
  explicit AnnealingLR(LrSchedulerOptions options);

  /// num_steps += increment (samples), num_tokens = consumed tokens so far; returns the new learning rate.
  double step(int64_t increment, int64_t num_tokens = 0);
  double lr() const { return lr_; }
  double get_lr();  // not const: may record warmup_tokens, as Megatron does

  int64_t num_steps() const { return num_steps_; }
  int64_t num_tokens() const { return num_tokens_; }
  const LrSchedulerOptions& options() const { return o_; }

  /// {max_lr, warmup_steps, num_steps, warmup_tokens, num_tokens, decay_style, decay_steps, min_lr}.
  nlohmann::json state_dict() const;
  /// Megatron's load: max_lr/min_lr/warmup_steps/decay_steps/decay_style each go through check-and-set
  /// (--override-lr-scheduler keeps the command line's, --use-checkpoint-lr-scheduler takes the checkpoint's, else
  /// they must be equal: CheckpointError naming the value), then the position is restored with
  /// step(num_steps, num_tokens) from zero. Legacy keys start_lr, warmup_iter, end_iter, num_iters are accepted.
  void load_state_dict(const nlohmann::json& state);

 private:
  LrSchedulerOptions o_;
  int64_t num_steps_ = 0;
  int64_t num_tokens_ = 0;
  int64_t warmup_tokens_ = 0;
  double lr_ = 0.0;
};

}  // namespace megaton::optim
