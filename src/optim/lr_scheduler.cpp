#include "optim/lr_scheduler.h"

#include <cmath>

#include "core/error.h"

namespace megaton::optim {

AnnealingLR::AnnealingLR(LrSchedulerOptions o) : o_(std::move(o)) {
  MEGATON_CHECK(o_.min_lr >= 0.0 && o_.max_lr >= o_.min_lr, UsageError, "learning rate schedule: need 0 <= --min-lr (",
                o_.min_lr, ") <= --lr (", o_.max_lr, ")");
  MEGATON_CHECK(o_.decay_steps > 0, UsageError, "learning rate schedule: the decay span must be > 0 samples (got ",
                o_.decay_steps, "); set --train-iters/--train-samples or --lr-decay-iters/--lr-decay-samples");
  MEGATON_CHECK(o_.warmup_steps >= 0 && o_.warmup_steps < static_cast<double>(o_.decay_steps), UsageError,
                "learning rate schedule: warmup (", o_.warmup_steps, " samples) must be shorter than the decay span (",
                o_.decay_steps, " samples)");
  MEGATON_CHECK(o_.decay_style == "constant" || o_.decay_style == "linear" || o_.decay_style == "cosine", UsageError,
                "--lr-decay-style: expected constant|linear|cosine, got '", o_.decay_style, "'");
  MEGATON_CHECK(!o_.decay_tokens || *o_.decay_tokens > 0, UsageError, "--lr-decay-tokens must be > 0");
  MEGATON_CHECK(!(o_.override_lr_scheduler && o_.use_checkpoint_lr_scheduler), UsageError,
                "--override-lr-scheduler and --use-checkpoint-lr-scheduler are exclusive");
  step(0, 0);
}

double AnnealingLR::get_lr() {
  const double n = static_cast<double>(num_steps_), w = o_.warmup_steps, d = static_cast<double>(o_.decay_steps);
  if (w > 0 && n <= w) {
    if (n == w && o_.decay_tokens) warmup_tokens_ = num_tokens_;
    return o_.max_lr * n / w;
  }
  if (o_.decay_style == "constant") return o_.max_lr;
  double ratio = 0.0;
  if (!o_.decay_tokens) {
    if (n > d) return o_.min_lr;
    ratio = (n - w) / (d - w);
  } else {
    const double t = static_cast<double>(*o_.decay_tokens);
    if (static_cast<double>(num_tokens_) > t) return o_.min_lr;
    ratio = static_cast<double>(num_tokens_ - warmup_tokens_) / (t - static_cast<double>(warmup_tokens_));
  }
  MEGATON_ASSERT(ratio >= 0.0 && ratio <= 1.0, "decay ratio ", ratio);
  const double coeff = o_.decay_style == "linear" ? 1.0 - ratio : 0.5 * (std::cos(M_PI * ratio) + 1.0);
  return o_.min_lr + coeff * (o_.max_lr - o_.min_lr);
}

double AnnealingLR::step(int64_t increment, int64_t num_tokens) {
  num_tokens_ = num_tokens;
  num_steps_ += increment;
  lr_ = get_lr();
  return lr_;
}

nlohmann::json AnnealingLR::state_dict() const {
  return {{"max_lr", o_.max_lr},           {"warmup_steps", o_.warmup_steps},
          {"num_steps", num_steps_},       {"warmup_tokens", warmup_tokens_},
          {"num_tokens", num_tokens_},     {"decay_style", o_.decay_style},
          {"decay_steps", o_.decay_steps}, {"min_lr", o_.min_lr}};
}

namespace {

const nlohmann::json& first_key(const nlohmann::json& s, const char* legacy, const char* key) {
  if (s.contains(legacy)) return s.at(legacy);
  MEGATON_CHECK(s.contains(key), CheckpointError, "learning rate scheduler state: missing key '", key, "' in ",
                s.dump());
  return s.at(key);
}

// _check_and_set: the command line's value, the checkpoint's, or a mismatch error.
template <typename T>
T check_and_set(const LrSchedulerOptions& o, const T& cls_value, const T& sd_value, const char* name) {
  if (o.override_lr_scheduler) return cls_value;
  MEGATON_CHECK(o.use_checkpoint_lr_scheduler || cls_value == sd_value, CheckpointError,
                "learning rate scheduler: the command line gives ", name, " = ", cls_value, " but the checkpoint has ",
                sd_value,
                "; pass --override-lr-scheduler to keep the command line's or --use-checkpoint-lr-scheduler to take "
                "the checkpoint's");
  return sd_value;
}

}  // namespace

void AnnealingLR::load_state_dict(const nlohmann::json& s) {
  MEGATON_CHECK(s.is_object(), CheckpointError, "learning rate scheduler state must be an object, got ", s.dump());
  try {
    o_.max_lr = check_and_set(o_, o_.max_lr, first_key(s, "start_lr", "max_lr").get<double>(), "learning rate");
    o_.min_lr = check_and_set(o_, o_.min_lr, first_key(s, "min_lr", "min_lr").get<double>(), "minimum learning rate");
    o_.warmup_steps = check_and_set(o_, o_.warmup_steps, first_key(s, "warmup_iter", "warmup_steps").get<double>(),
                                    "warmup iterations");
    o_.decay_steps = check_and_set(o_, o_.decay_steps, first_key(s, "end_iter", "decay_steps").get<int64_t>(),
                                   "total number of iterations");
    o_.decay_style = check_and_set(o_, o_.decay_style, first_key(s, "decay_style", "decay_style").get<std::string>(),
                                   "learning rate decay style");
    const int64_t steps = first_key(s, "num_iters", "num_steps").get<int64_t>();
    if (s.contains("warmup_tokens")) warmup_tokens_ = s.at("warmup_tokens").get<int64_t>();
    if (s.contains("num_tokens")) num_tokens_ = s.at("num_tokens").get<int64_t>();
    num_steps_ = 0;
    step(steps, num_tokens_);
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(
        str("learning rate scheduler state: a value has the wrong type (", e.what(), ") in ", s.dump()));
  }
}

}  // namespace megaton::optim
