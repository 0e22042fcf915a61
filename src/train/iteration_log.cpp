#include "train/iteration_log.h"

#include <cmath>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include "core/device_memory.h"
#include "core/format.h"
#include "train/layout_estimate.h"

namespace megaton::train {

namespace {

std::string fmt_e(double v, int precision = 6) {
  char b[32];
  std::snprintf(b, sizeof b, "%.*E", precision, v);
  return b;
}

}  // namespace

// The values of a line, captured at the end of its iteration (capture) and read one iteration later (flush): the
// losses and grad norm copied to pinned host memory behind the iteration's work, the timers' spans and the
// interval's device marks, and the host's counters as they were.
struct IterationLog::Pending {
  int64_t iteration = 0, consumed_train = 0, consumed_tokens = 0, global_batch = 0, iterations = 0, seq_length = 0;
  int64_t skipped = 0, total_skipped = 0;
  double lr = 0;
  std::optional<double> loss_scale;
  std::optional<int64_t> num_zeros;
  std::vector<bool> updated;  // per loss in `values`: whether its iteration's step was taken
  bool has_grad_norm = false, has_params_norm = false, has_num_zeros = false;
  torch::Tensor values;  // fp64 on the host [losses..., grad norm, params norm, num zeros, point grad norms...]
  std::vector<IterationLog::Point> points;
  size_t points_at = 0;  // where the points' grad norms start in `values`
  std::map<std::string, TimerReading> timers;
  std::shared_ptr<const DeviceMark> start, end;  // the interval
};

IterationLog::IterationLog(Context context, const LoggingOptions& options, int64_t train_iters)
    : c_(context), options_(options), train_iters_(train_iters), clock_(device_clock(context.model.device)) {
  if (logging_rank()) {
    if (!options_.tensorboard_dir.empty())
      tb_ = std::make_unique<TensorBoardWriter>(options_.tensorboard_dir, options_.tensorboard_queue_size);
    if (!options_.metrics_file.empty()) metrics_ = std::make_unique<MetricsLog>(options_.metrics_file);
  }
}

IterationLog::~IterationLog() = default;

bool IterationLog::logging_rank() const {
  return c_.groups.is_last_stage() && c_.groups.coords.tp == 0 && c_.groups.coords.dp == 0;
}

void IterationLog::start() {
  interval_start_ = mark_now(clock_);
}

void IterationLog::add_iteration(const StepOutcome& s, const TrainingProgress& progress) {
  if (!s.updated) ++skipped_in_interval_;
  if (tb_ && progress.iteration % std::max(1, options_.tensorboard_log_interval) == 0) {
    Point pt;
    pt.iteration = progress.iteration;
    pt.samples = progress.consumed_train_samples;
    pt.tokens = progress.consumed_train_tokens;
    pt.global_batch = s.global_batch;
    pt.seq_length = s.seq_length;
    pt.lr = c_.optimizer.lr();  // after the scheduler's step, as the fork logs it
    if (c_.optimizer.grad_scaler()) pt.loss_scale = c_.optimizer.loss_scale();
    if (s.loss.defined()) pt.loss_index = static_cast<int>(losses_.size());
    pt.grad_norm = s.grad_norm;
    points_.push_back(std::move(pt));
  }
  if (s.loss.defined()) losses_.emplace_back(s.loss, s.updated);
}

void IterationLog::capture(const StepOutcome& s, const TrainingProgress& progress, int64_t iterations) {
  auto p = std::make_unique<Pending>();
  p->iteration = progress.iteration;
  p->consumed_train = progress.consumed_train_samples;
  p->consumed_tokens = progress.consumed_train_tokens;
  p->global_batch = s.global_batch;
  p->seq_length = s.seq_length;
  p->iterations = iterations;
  p->skipped = skipped_in_interval_;
  p->total_skipped = c_.optimizer.skipped_steps();
  p->lr = c_.optimizer.lr();
  if (c_.optimizer.grad_scaler()) p->loss_scale = c_.optimizer.loss_scale();
  std::vector<torch::Tensor> device_values;  // [1] each
  for (const auto& [loss, updated] : losses_) {
    device_values.push_back(loss.reshape({1}).to(torch::kFloat64));
    p->updated.push_back(updated);
  }
  if (s.grad_norm) {
    device_values.push_back(s.grad_norm.tensor().reshape({1}).to(torch::kFloat64));
    p->has_grad_norm = true;
  }
  if (options_.log_params_norm) {  // after the logged iteration's update, as Megatron's calc_params_l2_norm
    device_values.push_back(c_.optimizer.params_norm().tensor().reshape({1}).to(torch::kFloat64));
    p->has_params_norm = true;
  }
  if (s.num_zeros) {
    device_values.push_back(s.num_zeros.tensor().reshape({1}).to(torch::kFloat64));
    p->has_num_zeros = true;
  }
  p->points_at = device_values.size();
  for (const Point& pt : points_)
    if (pt.grad_norm) device_values.push_back(pt.grad_norm.tensor().reshape({1}).to(torch::kFloat64));
  p->points = std::move(points_);
  points_.clear();
  if (!device_values.empty()) {
    const torch::Tensor d = torch::cat(device_values);  // [losses + grad norm + params norm + num zeros + points]
    p->values = torch::empty(d.sizes(), torch::TensorOptions().dtype(torch::kFloat64).pinned_memory(d.is_cuda()));
    p->values.copy_(d, /*non_blocking=*/true);
  }
  p->timers = c_.timers.take_all();
  std::shared_ptr<const DeviceMark> end = mark_now(clock_);  // after the copy: passing it means the copy is done
  p->start = interval_start_;
  p->end = end;
  interval_start_ = end;
  losses_.clear();
  skipped_in_interval_ = 0;
  pending_ = std::move(p);
}

void IterationLog::flush() {
  if (!pending_) return;
  const std::unique_ptr<Pending> p = std::move(pending_);
  const double interval_s = p->end->seconds_since(*p->start);  // waits for the device to pass the log point
  const double* v = p->values.defined() ? p->values.data_ptr<double>() : nullptr;
  double loss_sum = 0;
  int64_t loss_count = 0, nan_iterations = 0;
  for (size_t i = 0; i < p->updated.size(); ++i) {
    if (!std::isfinite(v[i]))
      ++nan_iterations;
    else if (p->updated[i])
      loss_sum += v[i], ++loss_count;
  }
  const std::optional<double> avg =
      loss_count > 0 ? std::optional<double>(loss_sum / double(loss_count)) : std::nullopt;
  const size_t norms_at = p->updated.size();
  const std::optional<double> grad_norm = p->has_grad_norm ? std::optional<double>(v[norms_at]) : std::nullopt;
  const size_t params_at = norms_at + (p->has_grad_norm ? 1 : 0), zeros_at = params_at + (p->has_params_norm ? 1 : 0);
  const std::optional<double> params_norm = p->has_params_norm ? std::optional<double>(v[params_at]) : std::nullopt;
  if (p->has_num_zeros) p->num_zeros = static_cast<int64_t>(v[zeros_at]);
  std::map<std::string, double> timer_seconds;
  for (const auto& [name, reading] : p->timers) timer_seconds[name] = reading.seconds();
  write(*p, interval_s, {avg, grad_norm, params_norm, nan_iterations}, timer_seconds);
}

void IterationLog::write(const Pending& p, double interval_s, const Values& values,
                         const std::map<std::string, double>& timer_seconds) {
  const std::optional<double>&avg = values.avg_loss, &grad_norm = values.grad_norm;
  const int64_t nan_iterations = values.nan_iterations;
  const double ms = interval_s * 1e3 / double(std::max<int64_t>(p.iterations, 1));
  const double flops = model_flops_per_iteration(c_.model.model, c_.model.padded_vocab_size, p.global_batch);
  const double tflops = flops / (ms * 1e-3 * c_.groups.grid.world() * 1e12);
  // The fork's estimate (training.py): 24 (32 with GLU) x 3 (4 with --checkpoint-activations) x B s L h^2 x
  // (1 + s / 6h + V / 16Lh), per GPU.
  const model::GptOptions& m = c_.model.model;
  const double s = double(p.seq_length), L = m.num_layers, h = m.hidden_size, V = double(c_.model.padded_vocab_size);
  const double fork_flops = (m.glu_activation.empty() ? 24.0 : 32.0) * (m.checkpoint_activations ? 4.0 : 3.0) *
                            double(p.global_batch) * s * L * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * L * h));
  const double fork_tflops = fork_flops / (ms * 1e-3 * c_.groups.grid.world() * 1e12);
  const double samples_per_s = double(p.global_batch) / (ms * 1e-3);
  const double tokens_per_s = samples_per_s * double(p.seq_length);
  const std::optional<DeviceMemory> mem = device_memory(c_.model.device);
  if (mem && !memory_reported_ && c_.groups.coords.dp == 0) {  // Megatron's report_memory, once, after the first log
    memory_reported_ = true;
    c_.log.info("(after ", p.iteration, " iterations) memory (MB) | allocated: ", fixed(mem->allocated_mib, 1),
                " | max allocated: ", fixed(mem->max_allocated_mib, 1), " | reserved: ", fixed(mem->reserved_mib, 1),
                " | max reserved: ", fixed(mem->max_reserved_mib, 1));
  }
  if (!logging_rank()) return;
  // Megatron-DeepSpeed's training_log line, field for field; megaton's tokens per second after it.
  std::ostringstream line;
  line << " iteration " << std::setw(8) << p.iteration << "/" << std::setw(8) << train_iters_
       << " | consumed samples: " << std::setw(12) << p.consumed_train << " | consumed tokens: " << std::setw(12)
       << p.consumed_tokens << " | elapsed time per iteration (s): " << fixed(ms * 1e-3, 2)
       << " | learning rate: " << fmt_e(p.lr, 3) << " | global batch size: " << std::setw(5) << p.global_batch << " |";
  if (avg) line << " lm loss: " << fmt_e(*avg) << " |";
  if (p.loss_scale) line << " loss scale: " << fixed(*p.loss_scale, 1) << " |";
  if (grad_norm) line << " grad norm: " << fixed(*grad_norm, 3) << " |";
  if (p.num_zeros) line << " num zeros: " << fixed(double(*p.num_zeros), 1) << " |";
  if (values.params_norm) line << " params norm: " << fixed(*values.params_norm, 3) << " |";
  if (c_.curriculum) line << " curriculum seqlen: " << std::setw(5) << p.seq_length << " |";
  line << " number of skipped iterations: " << std::setw(3) << p.skipped
       << " | number of nan iterations: " << std::setw(3) << nan_iterations
       << " | samples per second: " << fixed(samples_per_s, 3) << " | TFLOPs: " << fixed(fork_tflops, 2)
       << " | tokens per second: " << fixed(tokens_per_s, 1) << " | model TFLOPs: " << fixed(tflops, 2) << " |";
  // Time per iteration in data-parallel and pipeline operations not hidden behind other work (TimedCommunicator).
  for (const char* group : {"dp", "pp"}) {
    const auto t = timer_seconds.find(std::string(group) + "-comm");
    if (t != timer_seconds.end())
      line << " exposed " << group
           << " comm (ms): " << fixed(t->second * 1e3 / double(std::max<int64_t>(p.iterations, 1)), 1) << " |";
  }
  c_.out << line.str() << std::endl;
  const double left_s = double(train_iters_ - p.iteration) * ms * 1e-3;
  c_.log.info(fixed(100.0 * double(p.iteration) / double(std::max<int64_t>(train_iters_, 1)), 1), "% ", p.iteration,
              "/", train_iters_, " iterations, ", fixed(1e3 / ms, 2), " it/s, ETA ", format_duration(left_s));

  const int64_t it = p.iteration, samples = p.consumed_train, tokens = p.consumed_tokens;
  if (tb_) {
    write_points(p, p.values.defined() ? p.values.data_ptr<double>() : nullptr);
    // The series the fork writes at log lines only: norms and zeros (computed for log lines), the timing series.
    const auto& lg = options_;
    if (it % std::max(1, lg.tensorboard_log_interval) == 0) {
      if (p.num_zeros) tb_->add_scalar_vs_progress("num-zeros/num-zeros", double(*p.num_zeros), it, samples, tokens);
      if (values.params_norm)
        tb_->add_scalar_vs_progress("params-norm/params-norm", *values.params_norm, it, samples, tokens);
    }
    if (lg.log_timers_to_tensorboard) {
      const double dp = double(c_.groups.grid.dp_size());
      tb_->add_scalar_vs_progress("iteration-time/iteration-time", ms * 1e-3, it, samples, tokens);
      tb_->add_scalar("iteration-time/samples per second", samples_per_s, it);
      tb_->add_scalar("iteration-time/samples per second per replica", samples_per_s / dp, it);
      tb_->add_scalar("iteration-time/tokens per second", tokens_per_s, it);
      tb_->add_scalar("iteration-time/tokens per second per replica", tokens_per_s / dp, it);
      tb_->add_scalar("iteration-time/TFLOPs per gpu (estimated)", fork_tflops, it);
      const double n = double(std::max<int64_t>(p.iterations, 1));
      for (const auto& [name, sec] : timer_seconds) tb_->add_scalar(name + "-time", sec / n, it);
    }
    tb_->flush();
  }
  if (metrics_) {
    IterationMetrics im;
    im.iteration = it;
    im.train_iters = train_iters_;
    im.consumed_samples = samples;
    im.consumed_tokens = tokens;
    im.elapsed_ms_per_iteration = ms;
    im.learning_rate = p.lr;
    im.global_batch_size = p.global_batch;
    im.lm_loss = avg;
    im.loss_scale = p.loss_scale;
    im.grad_norm = grad_norm;
    im.num_zeros = p.num_zeros;
    im.params_norm = values.params_norm;
    im.skipped_iterations = p.skipped;
    im.nan_iterations = nan_iterations;
    im.samples_per_second = samples_per_s;
    im.tflops = tflops;
    im.extra["tokens_per_second"] = tokens_per_s;
    im.extra["total_skipped_iterations"] = p.total_skipped;
    if (c_.curriculum) im.extra["curriculum_seqlen"] = p.seq_length;
    for (const auto& [name, sec] : timer_seconds) im.extra["timer_ms"][name] = sec * 1e3;
    if (mem) {
      im.extra["mem_max_allocated_mib"] = mem->max_allocated_mib;
      im.extra["mem_max_reserved_mib"] = mem->max_reserved_mib;
    }
    metrics_->write(im);
  }
}

void IterationLog::loss_series(const std::string& tag, double value, int64_t iteration, int64_t samples,
                               int64_t tokens) {
  tb_->add_scalar_vs_progress(tag, value, iteration, samples, tokens);
  // TensorBoard's steps are integers: the fork's float gigaflos count is truncated by torch's writer too.
  tb_->add_scalar(tag + " vs gigaflos (without embeddings)", value,
                  static_cast<int64_t>(c_.gigaflos_per_token * double(tokens)));
}

void IterationLog::write_points(const Pending& p, const double* v) {
  const auto& lg = options_;
  size_t next_norm = p.points_at;
  for (const Point& pt : p.points) {
    const int64_t it = pt.iteration, samples = pt.samples, tokens = pt.tokens;
    tb_->add_scalar("steps-vs-samples/y=steps,x=samples", double(it), samples);
    tb_->add_scalar("steps-vs-samples/y=samples,x=steps", double(samples), it);
    tb_->add_scalar("steps-vs-tokens/y=steps,x=tokens", double(it), tokens);
    tb_->add_scalar("steps-vs-tokens/y=tokens,x=steps", double(tokens), it);
    if (lg.log_learning_rate_to_tensorboard)
      tb_->add_scalar_vs_progress("learning-rate/learning-rate", pt.lr, it, samples, tokens);
    if (lg.log_batch_size_to_tensorboard) {
      tb_->add_scalar("batch-size/batch-size", double(pt.global_batch), it);
      tb_->add_scalar("batch-size/batch-size vs samples", double(pt.global_batch), samples);
    }
    if (pt.loss_index >= 0 && v != nullptr) {
      loss_series("lm-loss-training/lm loss", v[pt.loss_index], it, samples, tokens);
    }
    if (pt.loss_scale && lg.log_loss_scale_to_tensorboard)
      tb_->add_scalar_vs_progress("loss-scale/loss-scale", *pt.loss_scale, it, samples, tokens);
    if (pt.grad_norm && v != nullptr)
      tb_->add_scalar_vs_progress("grad-norm/grad-norm", v[next_norm++], it, samples, tokens);
    if (c_.curriculum) tb_->add_scalar("curriculum_seqlen", double(pt.seq_length), it);
  }
}

void IterationLog::validation(const std::string& name, double loss, const TrainingProgress& progress) {
  if (!logging_rank()) return;
  const double ppl = std::exp(std::min(20.0, loss));
  const int64_t it = progress.iteration, samples = progress.consumed_train_samples;
  const int64_t tokens = progress.consumed_train_tokens;
  // evaluate_and_print_results: "validation loss at ..." in mode 1, "NAME loss at ..." for a mode-2 group.
  std::ostringstream line;
  line << (name.empty() ? "validation" : name) << " loss at iteration " << it << " | lm loss value: " << fmt_e(loss)
       << " | lm loss PPL: " << fmt_e(ppl) << " | ";
  const std::string bar(line.str().size() + 1, '-');
  c_.out << bar << "\n" << line.str() << "\n" << bar << std::endl;
  if (tb_) {
    const std::string prefix = name.empty() ? "lm-loss-validation" : "lm-loss-validation/" + name;
    loss_series(prefix + "/lm loss validation", loss, it, samples, tokens);
    if (options_.log_validation_ppl_to_tensorboard)
      loss_series(prefix + "/lm loss validation ppl", ppl, it, samples, tokens);
    tb_->flush();
  }
  if (metrics_)
    metrics_->write(nlohmann::json{{"iteration", it},
                                   {"consumed_samples", samples},
                                   {"consumed_tokens", tokens},
                                   {"valid_name", name},
                                   {"valid_lm_loss", loss},
                                   {"valid_lm_loss_ppl", ppl}});
}

}  // namespace megaton::train
