#include "train/trainer.h"

#include <torch/cuda.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <sstream>

#include "checkpoint/checkpoint.h"
#include "core/device_clock.h"
#include "core/device_memory.h"
#include "core/error.h"
#include "data/dataset_builder.h"
#include "data/tokenizer.h"
#include "dist/mpi_session.h"
#include "model/gpt_stage.h"
#include "ops/activations.h"
#include "optim/grad_scaler.h"
#include "optim/lr_scheduler.h"
#include "optim/microbatches.h"
#include "optim/optimizer.h"
#include "parallel/data_parallel.h"
#include "parallel/pipeline/schedules.h"
#include "train/batches.h"
#include "train/layout_estimate.h"
#include "train/metrics_log.h"
#include "train/step_profiler.h"
#include "train/stop_signals.h"
#include "train/tensorboard_writer.h"
#include "train/training_state.h"

namespace megaton::train {

namespace {

// Reasons to stop, agreed with an all-reduce MAX (the largest code wins).
enum StopReason { kNone = 0, kExitInterval = 1, kDuration = 2, kKillSwitch = 3, kSignal = 4 };
const char* stop_reason_name(int r) {
  switch (r) {
    case kExitInterval:
      return "--exit-interval reached";
    case kDuration:
      return "--exit-duration-in-mins reached";
    case kKillSwitch:
      return "kill switch file found";
    case kSignal:
      return "SIGTERM/SIGUSR1 received";
    default:
      return "done";
  }
}

torch::ScalarType training_dtype(const cli::PrecisionArgs& p) {
  return p.fp16 ? torch::kHalf : p.bf16 ? torch::kBFloat16 : torch::kFloat32;
}

std::string fmt_e(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6E", v);
  return b;
}
std::string fmt_f(double v, int prec) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

}  // namespace

Trainer::Trainer(TrainConfig cfg, const dist::LaunchEnv& env, std::ostream& out)
    : cfg_(std::move(cfg)),
      env_(env),
      out_(out),
      log_(env.rank, env.size, parse_log_level(cfg_.logging.log_level)),
      groups_{dist::RankGrid(env.size, cfg_.parallel.tensor_model_parallel_size,
                             cfg_.parallel.pipeline_model_parallel_size)} {
  build();
}

Trainer::~Trainer() = default;


bool Trainer::logging_rank() const {
  return groups_.is_last_stage() && groups_.coords.tp == 0 && groups_.coords.dp == 0;
}

bool Trainer::interleaved() const {
  return cfg_.parallel.num_layers_per_virtual_pipeline_stage > 0;
}
bool Trainer::holds_embedding() const {
  return chunks_.front()->is_first_stage();
}
bool Trainer::holds_loss() const {
  return chunks_.back()->is_last_stage();
}
bool Trainer::stage_reads_data() const {
  // Every stage's layers take --reset-attention-mask's mask, drawn from the tokens (as every stage's get_batch does
  // in Megatron); otherwise only the first stage (tokens, positions) and the last (labels, loss mask) read samples.
  return holds_embedding() || holds_loss() || cfg_.data.reset_attention_mask;
}
BatchOptions Trainer::batch_options() const {
  BatchOptions o;
  o.eod_mask_loss = cfg_.data.eod_mask_loss;
  o.reset_position_ids = cfg_.data.reset_position_ids;
  o.reset_attention_mask = cfg_.data.reset_attention_mask;
  o.eod = eod_;
  o.device = gpt_->device;
  return o;
}

torch::Tensor Trainer::forward_step(int chunk, const model::MicroBatch& b, const torch::Tensor& input) {
  model::GptStage& stage = *chunks_[static_cast<size_t>(chunk)];
  const torch::Tensor& in = stage.is_first_stage() ? b.tokens : input;
  const ops::Documents docs = b.documents.per_forward();  // its mask (where one is built) freed with this forward
  if (!stage.is_last_stage()) return stage.forward(in, b.position_ids, docs);  // [s, b, h]
  return model::GptStage::masked_mean(stage.forward_losses(in, b.labels, b.position_ids, docs), b.loss_mask);  // []
}

void Trainer::run_schedule(int m, const std::function<torch::Tensor(int, int, const torch::Tensor&)>& forward,
                           bool forward_only) {
  namespace pl = parallel::pipeline;
  const auto& t = cfg_.training;
  auto p2p = [&] {
    return pl::P2p(*groups_.pp, {cfg_.model.seq_length, t.micro_batch_size, gpt_->hidden()},
                   torch::TensorOptions().dtype(gpt_->residual_dtype()).device(gpt_->device));
  };
  if (interleaved()) {
    pl::ChunkedStep step;
    step.forward = forward;
    // The DP hooks start a bucket's reduction once every parameter in it has its last gradient: each chunk's last
    // backward is micro-batch M - 1 (chunks finish at different times; a bucket holding parameters of several
    // chunks waits for all of them, and finish_grad_sync, after the schedule, reduces whatever is left).
    step.before_backward = [&](int, int mb) { dp_->set_last_microbatch(mb == m - 1); };
    pl::P2p link = p2p();
    pl::forward_backward_interleaved(m, static_cast<int>(chunks_.size()), link, step, forward_only);
    return;
  }
  pl::StageStep step;
  step.forward = [&](int mb, const torch::Tensor& input) { return forward(0, mb, input); };
  step.before_backward = [&](int mb) { dp_->set_last_microbatch(mb == m - 1); };
  if (forward_only) {
    pl::P2p link = p2p();
    pl::forward_only(m, link, step);
  } else if (groups_.grid.pp_size() == 1) {
    pl::forward_backward_no_pipelining(m, step);
  } else {
    pl::P2p link = p2p();
    pl::forward_backward_1f1b(m, link, step);
  }
}

void Trainer::build() {
  const auto& p = cfg_.parallel;
  const auto& t = cfg_.training;
  MEGATON_CHECK(p.zero_stage == 0 || p.zero_stage == 1, UsageError, "--zero-stage ", p.zero_stage,
                ": only 0 and 1 are supported");
  MEGATON_CHECK(!cfg_.data.data_path.empty() || data::uses_weighted_split_paths(cfg_.data), UsageError,
                "megaton train needs --data-path (a preprocessed PREFIX, or W1 P1 W2 P2 ...) or "
                "--train-weighted-split-paths[-path]");
  skip_ranges_ = parse_skip_ranges(t.skip_train_iteration_range);

  const torch::Device device(dist::select_device(p.device, env_.local_rank));
  clock_ = device_clock(device);
  timers_.set_device_clock(clock_);  // CUDA events on the GPU: timing never waits for the device
  if (cfg_.precision.fp16 && !device.is_cuda()) {
    // LibTorch 1.13 has no fp16 matrix multiply on CPU: say so before anything is built, not mid-iteration.
    try {
      const torch::Tensor a = torch::ones({2, 2}, torch::kHalf);
      (void)torch::matmul(a, a);
    } catch (const c10::Error&) {
      throw UsageError("--fp16 on CPU: this LibTorch has no fp16 matrix multiply on CPU; use --bf16, or a GPU");
    }
  }
  groups_ = dist::build_process_groups(groups_.grid, dist::parse_backend(p.distributed_backend, device.is_cuda()),
                                       p.distributed_timeout_minutes * 60.0);
  log_.set_coords(groups_.coords.tp, groups_.coords.pp, groups_.coords.dp);
  log_.info0("megaton train: ", groups_.grid.describe(), " on ", device.str());

  // Vocabulary: the tokenizer's, or --vocab-size for pre-tokenized data without tokenizer files.
  int64_t vocab = cfg_.vocab_size;
  if (!cfg_.data.tokenizer_type.empty()) {
    auto tok = data::make_tokenizer(cfg_.data);
    vocab = tok->vocab_size();
    eod_ = tok->eod();
  }
  MEGATON_CHECK(vocab > 0, UsageError, "megaton train needs --tokenizer-type (with its files) or --vocab-size");
  MEGATON_CHECK(!cfg_.data.eod_mask_loss || eod_ >= 0, UsageError, "--eod-mask-loss needs a tokenizer (its EOD id)");
  MEGATON_CHECK(!(cfg_.data.reset_position_ids || cfg_.data.reset_attention_mask) || eod_ >= 0, UsageError,
                "--reset-position-ids / --reset-attention-mask need a tokenizer (its EOD id)");

  gpt_ = std::make_unique<model::GptConfig>();
  gpt_->model = cfg_.model;
  gpt_->vocab_size = vocab;
  gpt_->padded_vocab_size = cli::padded_vocab_size(vocab, cfg_.model, p.tensor_model_parallel_size);
  gpt_->seed = static_cast<uint64_t>(t.seed);
  gpt_->dtype = training_dtype(cfg_.precision);
  gpt_->device = device;
  gpt_->pp_partition_method = p.pp_partition_method;
  model::validate_gpt_config(*gpt_, p.tensor_model_parallel_size, p.pipeline_model_parallel_size);
  if (interleaved()) {
    const int pp = p.pipeline_model_parallel_size, n = p.num_layers_per_virtual_pipeline_stage;
    const int chunks = cfg_.model.num_layers / (pp * n);
    std::shared_ptr<parallel::RngTracker> rng;  // one dropout RNG for the rank, shared by its chunks (as Megatron)
    for (int k = 0; k < chunks; ++k) {
      chunks_.push_back(std::make_unique<model::GptStage>(
          *gpt_, groups_, model::virtual_stage_part(*gpt_, pp, groups_.coords.pp, k, n), rng));
      rng = chunks_.back()->shared_rng();
    }
    log_.info0("interleaved pipeline: ", chunks, " model chunks of ", n, " layers per rank");
  } else {
    chunks_.push_back(std::make_unique<model::GptStage>(*gpt_, groups_));
  }
  for (const auto& c : chunks_) params_.insert(params_.end(), c->params().begin(), c->params().end());

  parallel::DataParallelOptions dpo;
  dpo.bucket_size_mb = static_cast<double>(p.dp_bucket_size_mb);
  dpo.overlap_grad_reduce = true;
  dpo.zero1 = p.zero_stage == 1;
  dp_ = std::make_unique<parallel::DataParallel>(params_, groups_, dpo);
  // Gradient accumulation fusion: the linear layers' weight-gradient GEMMs add into DataParallel's fp32 main grads
  // (each one's first gradient of an iteration writes instead of adding: DataParallel does not zero them).
  if (!cfg_.model.no_gradient_accumulation_fusion)
    for (const auto& c : chunks_) {
      c->main_grads().bind(dp_->param_buffer(), dp_->grad_buffer());
      dp_->attach(c->main_grads());
    }
  optim::OptimizerOptions opt = optim::optimizer_options(t);
  opt.log_num_zeros_in_grad = cfg_.logging.log_num_zeros_in_grad;
  optimizer_ = std::make_unique<optim::MixedPrecisionOptimizer>(*dp_, groups_, std::move(opt),
                                                                optim::make_grad_scaler(cfg_.precision));

  micro_ = std::make_unique<optim::NumMicroBatchesCalculator>(
      optim::make_num_micro_batches_calculator(t, groups_.grid.dp_size()));
  cli::TrainingArgs targs = t;
  train_iters_ = t.train_iters > 0 ? t.train_iters : optim::train_iters_for_samples(t.train_samples, *micro_);
  targs.train_iters = train_iters_;
  lr_ = std::make_unique<optim::AnnealingLR>(optim::lr_scheduler_options(targs));

  // Datasets: Megatron's sample counts for the three splits.
  const int64_t gbs = micro_->global_batch_size();
  const int64_t eval_runs = t.eval_interval > 0 ? train_iters_ / t.eval_interval + 1 : 1;
  const std::array<int64_t, 3> counts{t.train_samples > 0 ? t.train_samples : train_iters_ * gbs,
                                      eval_runs * t.eval_iters * gbs, t.eval_iters * gbs};
  auto sets =
      data::build_train_valid_test_datasets(cfg_.data, cfg_.model.seq_length, static_cast<uint32_t>(t.seed), counts,
                                            log_, groups_.rank == 0, [this] { groups_.world->barrier(); });
  train_ds_ = sets.train;
  valid_sets_ = sets.valid_groups;
  MEGATON_CHECK(train_ds_ != nullptr, UsageError, "--split gives the train split no documents; nothing to train on");

  if (logging_rank()) {
    if (!cfg_.logging.tensorboard_dir.empty())
      tb_ = std::make_unique<TensorBoardWriter>(cfg_.logging.tensorboard_dir, cfg_.logging.tensorboard_queue_size);
    if (!cfg_.logging.metrics_file.empty()) metrics_ = std::make_unique<MetricsLog>(cfg_.logging.metrics_file);
  }
  signals_ = std::make_unique<StopSignals>();
  report_memory();
  if (!cfg_.checkpoint.load.empty()) load();
  optimizer_->set_lr(lr_->lr());
}

void Trainer::report_memory() {
  int64_t n = 0;
  for (const auto& pi : params_) n += pi.param.numel();
  const double mib = 1024.0 * 1024.0;
  const double weights = double(dp_->param_buffer().numel() * dp_->param_buffer().element_size()) / mib;
  const double grads = double(dp_->grad_buffer().numel() * 4) / mib;
  const bool separate_master = gpt_->dtype != torch::kFloat32 || !dp_->shard_is_whole();
  const int moments = cfg_.training.optimizer == "adam" ? 2 : 1;
  const double opt = double(dp_->shard_numel() * 4 * (moments + (separate_master ? 1 : 0))) / mib +
                     (dp_->shard_is_whole() ? 0.0 : double(dp_->shard_numel() * 4) / mib);
  if (groups_.coords.dp == 0)
    log_.info("number of parameters on (tensor, pipeline) model parallel rank (", groups_.coords.tp, ", ",
              groups_.coords.pp, "): ", n, " | memory per rank: weights ", fmt_f(weights, 2), " MiB, fp32 grads ",
              fmt_f(grads, 2), " MiB, optimizer state ", fmt_f(opt, 2), " MiB",
              dp_->zero1() ? " (ZeRO-1 shard 1/" + std::to_string(dp_->dp_size()) + ")" : "", ", total ",
              fmt_f(weights + grads + opt, 2), " MiB");
}

void Trainer::load() {
  const auto& c = cfg_.checkpoint;
  checkpoint::LoadOptions lo;
  lo.load_optim = !c.no_load_optim && !c.finetune;
  lo.load_rng = !c.no_load_rng && !c.finetune;
  lo.finetune = c.finetune;
  lo.expected_model_config = model_config_json(*gpt_);
  checkpoint::OptimState optim_state = to_checkpoint_optim(optimizer_->state_dict());
  checkpoint::RngState rng_state = rng_to_checkpoint(chunks_.front()->rng());
  parallel::ParamList params = params_;
  auto r = checkpoint::load_checkpoint(c.load, params, lo.load_optim ? &optim_state : nullptr,
                                       lo.load_rng ? &rng_state : nullptr, groups_, lo, log_);
  if (!r) return;
  iteration_ = r->iteration;
  if (!c.finetune) {
    const auto& st = r->meta.state;
    consumed_train_ = st.value("consumed_train_samples", int64_t{0});
    consumed_valid_ = st.value("consumed_valid_samples", int64_t{0});
    consumed_tokens_ = st.value("consumed_train_tokens", int64_t{0});
    // As Megatron: --no-load-optim skips the learning-rate scheduler too (the command line's schedule starts over).
    if (lo.load_optim && st.contains("lr_scheduler")) lr_->load_state_dict(st["lr_scheduler"]);
    if (r->optim_loaded && st.contains("optimizer")) optimizer_->load_scalar_state(st["optimizer"]);
  }
  if (r->optim_loaded)
    optimizer_->load_state_dict(from_checkpoint_optim(optim_state));
  else
    optimizer_->reload_model_params();
  if (r->rng_loaded) {
    if (r->saved_layout == checkpoint::SavedLayout{groups_.grid.tp_size(), groups_.grid.pp_size(),
                                                   groups_.grid.dp_size(), groups_.grid.world()})
      rng_from_checkpoint(rng_state, chunks_.front()->rng());
    else
      log_.warn0("checkpoint saved at another layout: dropout RNG states start fresh");
  }
  last_saved_ = iteration_;
  log_.info0("loaded ", r->path, " at iteration ", iteration_, ", consumed samples ", consumed_train_,
             r->optim_loaded ? "" : " (model weights only)");
}

void Trainer::save() {
  const auto& c = cfg_.checkpoint;
  if (c.save.empty() || last_saved_ == iteration_) return;
  Timer took;  // host clock: the save is host work (device-to-host copies and file writes)
  took.start();
  checkpoint::CheckpointState st;
  st.iteration = iteration_;
  st.state = {{"consumed_train_samples", consumed_train_},
              {"consumed_valid_samples", consumed_valid_},
              {"consumed_train_tokens", consumed_tokens_},
              {"lr_scheduler", lr_->state_dict()},
              {"optimizer", optimizer_->scalar_state()}};
  st.model_config = model_config_json(*gpt_);
  st.args = args_json(cfg_);
  checkpoint::SaveOptions so;
  so.save_optim = !c.no_save_optim;
  so.save_rng = !c.no_save_rng;
  so.keep_last = c.keep_last;
  so.job_id = env_.job_id;
  const checkpoint::OptimState optim_state = to_checkpoint_optim(optimizer_->state_dict());  // collective under ZeRO
  const checkpoint::RngState rng_state = rng_to_checkpoint(chunks_.front()->rng());
  const std::string dir = checkpoint::save_checkpoint(c.save, st, params_, so.save_optim ? &optim_state : nullptr,
                                                      so.save_rng ? &rng_state : nullptr, groups_, so, log_);
  last_saved_ = iteration_;
  log_.info0("saved checkpoint at iteration ", iteration_, " to ", dir, " (", fmt_f(took.elapsed() * 1e3, 1), " ms)");
}

StepOutcome Trainer::train_step(bool log_point) {
  StepOutcome s;
  micro_->update(consumed_train_, true);
  const int m = static_cast<int>(micro_->num_micro_batches());
  s.global_batch = micro_->current_global_batch_size();
  const auto& t = cfg_.training;

  // This DP rank's micro-batches of the global batch (Megatron's pretraining sampler, from consumed samples).
  timers_("batch-generator").start();
  data::PretrainingSampler sampler(train_ds_->size(), consumed_train_, t.micro_batch_size, groups_.coords.dp,
                                   groups_.grid.dp_size());
  const bool needs_data = stage_reads_data();
  std::vector<model::MicroBatch> batches(static_cast<size_t>(m));
  const BatchOptions bo = batch_options();
  for (int i = 0; i < m; ++i) {
    std::vector<int64_t> idx;
    MEGATON_CHECK(sampler.next(idx), DataError, "the train dataset ran out of samples at consumed samples ",
                  consumed_train_, " (", train_ds_->size(), " samples in the index)");
    if (needs_data) batches[static_cast<size_t>(i)] = make_micro_batch(*train_ds_, idx, bo);
  }
  timers_("batch-generator").stop();

  const int64_t next_iteration = iteration_ + 1;
  for (const auto& [a, b] : skip_ranges_)
    if (next_iteration >= a && next_iteration <= b) s.skipped_data = true;
  if (s.skipped_data) return s;

  optimizer_->zero_grad();
  const double scale = optimizer_->loss_scale();
  std::vector<torch::Tensor> losses;  // [] each, on the device: read once after the schedule, no sync per micro-batch
  auto forward = [&](int chunk, int mb, const torch::Tensor& input) -> torch::Tensor {
    torch::Tensor out = forward_step(chunk, batches[static_cast<size_t>(mb)], input);
    if (!chunks_[static_cast<size_t>(chunk)]->is_last_stage()) return out;
    losses.push_back(out.detach());
    return out * (scale / m);
  };
  // average_losses_across_data_parallel_group's local part, on the device (fp64 mean): [1]
  auto mean_loss = [&] {
    return holds_loss() ? torch::stack(losses).to(torch::kFloat64).mean().reshape({1}) : torch::Tensor();
  };
  timers_("forward-backward").start();
  run_schedule(m, forward, false);
  const torch::Tensor loss = mean_loss();
  timers_("forward-backward").stop();

  timers_("optimizer").start();
  if (cfg_.parallel.sync_tp_duplicated_parameters) {
    dp_->finish_grad_sync();
    dp_->average_tp_replicated_grads(*groups_.tp);
  }
  const auto r = optimizer_->step(/*want_zero_count=*/log_point);
  timers_("optimizer").stop();
  s.updated = r.updated;
  s.grad_norm = r.grad_norm;
  s.num_zeros = r.num_zeros;
  if (holds_loss()) {
    // Averaged over DP (fp32 over NCCL); the host reads it after the next log line (capture_log, flush_log), not here.
    torch::Tensor l = gpt_->device.is_cuda() ? loss.to(torch::kFloat32) : loss.clone();
    groups_.dp->all_reduce(l, dist::ReduceOp::kAvg);
    s.loss = l;
  }
  return s;
}

std::optional<double> Trainer::evaluate() {
  // Every validation dataset (mode 2: one per group) sees the same stretch of its own samples, as each group has its
  // own iterator in Megatron-DeepSpeed. Returns the first one's loss.
  std::optional<double> first;
  const int64_t start = consumed_valid_;
  for (size_t k = 0; k < valid_sets_.size(); ++k) {
    consumed_valid_ = start;
    const auto loss = evaluate_dataset(valid_sets_[k]);
    if (k == 0) first = loss;
  }
  return first;
}

std::optional<double> Trainer::evaluate_dataset(const data::NamedDataset& valid) {
  if (!valid.data || cfg_.training.eval_iters <= 0) return std::nullopt;
  const data::SampleDataset& valid_ds = *valid.data;
  const std::string suffix = valid.name.empty() ? "" : "-" + valid.name;  // BigScience's "validation-NAME"
  const auto& t = cfg_.training;
  for (auto& c : chunks_) c->set_training(false);
  const int m = static_cast<int>(micro_->num_micro_batches());
  const bool needs_data = stage_reads_data();
  const BatchOptions bo = batch_options();
  double total = 0;
  int64_t n = 0;
  for (int64_t it = 0; it < t.eval_iters; ++it) {
    data::PretrainingSampler sampler(valid_ds.size(), consumed_valid_ % std::max<int64_t>(valid_ds.size(), 1),
                                     t.micro_batch_size, groups_.coords.dp, groups_.grid.dp_size());
    std::vector<model::MicroBatch> batches(static_cast<size_t>(m));
    for (int i = 0; i < m; ++i) {
      std::vector<int64_t> idx;
      if (!sampler.next(idx)) {  // wrap around a small valid split
        sampler =
            data::PretrainingSampler(valid_ds.size(), 0, t.micro_batch_size, groups_.coords.dp, groups_.grid.dp_size());
        MEGATON_CHECK(sampler.next(idx), DataError, "the validation split holds fewer than one global batch of ",
                      "micro-batches (", valid_ds.size(), " samples)");
      }
      if (needs_data) batches[static_cast<size_t>(i)] = make_micro_batch(valid_ds, idx, bo);
    }
    consumed_valid_ += micro_->current_global_batch_size();
    auto forward = [&](int chunk, int mb, const torch::Tensor& input) -> torch::Tensor {
      torch::Tensor out = forward_step(chunk, batches[static_cast<size_t>(mb)], input);
      if (!chunks_[static_cast<size_t>(chunk)]->is_last_stage()) return out;
      total += out.item<double>();
      ++n;
      return {};
    };
    run_schedule(m, forward, true);
  }
  for (auto& c : chunks_) c->set_training(true);
  if (!holds_loss()) return std::nullopt;
  torch::Tensor l = torch::tensor({float(total / std::max<int64_t>(n, 1))}).to(gpt_->device);
  groups_.dp->all_reduce(l, dist::ReduceOp::kAvg);
  const double loss = l.to(torch::kCPU).item<double>();
  if (logging_rank()) {
    const double ppl = std::exp(std::min(20.0, loss));
    std::ostringstream line;
    line << " validation" << suffix << " loss at iteration " << iteration_ << " | lm loss value: " << fmt_e(loss)
         << " | lm loss PPL: " << fmt_e(ppl) << " | ";
    const std::string bar(line.str().size(), '-');
    out_ << bar << "\n" << line.str() << "\n" << bar << std::endl;
    if (tb_) {
      tb_->add_scalar_vs_progress("lm loss validation" + suffix, loss, iteration_, consumed_train_, consumed_tokens_);
      if (cfg_.logging.log_validation_ppl_to_tensorboard)
        tb_->add_scalar_vs_progress("lm loss validation" + suffix + " ppl", ppl, iteration_, consumed_train_,
                                    consumed_tokens_);
      tb_->flush();
    }
    if (metrics_)
      metrics_->write(nlohmann::json{{"iteration", iteration_},
                                     {"consumed_samples", consumed_train_},
                                     {"valid_name", valid.name},
                                     {"valid_lm_loss", loss},
                                     {"valid_lm_loss_ppl", ppl}});
  }
  return loss;
}

// The values of a log line, captured at the end of its iteration (capture_log) and read one iteration later
// (flush_log): the losses and grad norm copied to pinned host memory behind the iteration's work, the timers' spans and
// the interval's device marks, and the host's counters as they were.
struct Trainer::PendingLog {
  int64_t iteration = 0, consumed_train = 0, consumed_tokens = 0, global_batch = 0, iterations = 0;
  int64_t skipped = 0, total_skipped = 0;
  double lr = 0;
  std::optional<double> loss_scale;
  std::optional<int64_t> num_zeros;
  std::vector<bool> updated;  // per loss in `values`: whether its iteration's step was taken
  bool has_grad_norm = false, has_params_norm = false, has_num_zeros = false;
  torch::Tensor values;  // fp64 on the host [losses..., grad norm, params norm, num zeros]; written before `end`
  std::map<std::string, TimerReading> timers;
  std::shared_ptr<const DeviceMark> start, end;  // the interval
};

void Trainer::capture_log(const StepOutcome& s, int64_t iterations_in_interval) {
  auto p = std::make_unique<PendingLog>();
  p->iteration = iteration_;
  p->consumed_train = consumed_train_;
  p->consumed_tokens = consumed_tokens_;
  p->global_batch = s.global_batch;
  p->iterations = iterations_in_interval;
  p->skipped = skipped_in_interval_;
  p->total_skipped = optimizer_->skipped_steps();
  p->lr = optimizer_->lr();
  if (optimizer_->grad_scaler()) p->loss_scale = optimizer_->loss_scale();
  std::vector<torch::Tensor> device_values;  // [1] each
  for (const auto& [loss, updated] : pending_losses_) {
    device_values.push_back(loss.reshape({1}).to(torch::kFloat64));
    p->updated.push_back(updated);
  }
  if (s.grad_norm) {
    device_values.push_back(s.grad_norm.tensor().reshape({1}).to(torch::kFloat64));
    p->has_grad_norm = true;
  }
  if (cfg_.logging.log_params_norm) {  // after the logged iteration's update, as Megatron's calc_params_l2_norm
    device_values.push_back(optimizer_->params_norm().tensor().reshape({1}).to(torch::kFloat64));
    p->has_params_norm = true;
  }
  if (s.num_zeros) {
    device_values.push_back(s.num_zeros.tensor().reshape({1}).to(torch::kFloat64));
    p->has_num_zeros = true;
  }
  if (!device_values.empty()) {
    const torch::Tensor d = torch::cat(device_values);  // [losses + grad norm + params norm + num zeros]
    p->values = torch::empty(d.sizes(), torch::TensorOptions().dtype(torch::kFloat64).pinned_memory(d.is_cuda()));
    p->values.copy_(d, /*non_blocking=*/true);
  }
  p->timers = timers_.take_all();
  std::shared_ptr<const DeviceMark> end = mark_now(clock_);  // after the copy: passing it means the copy is done
  p->start = interval_start_;
  p->end = end;
  interval_start_ = end;
  pending_losses_.clear();
  skipped_in_interval_ = 0;
  pending_log_ = std::move(p);
}

void Trainer::flush_log() {
  if (!pending_log_) return;
  const std::unique_ptr<PendingLog> p = std::move(pending_log_);
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
  log_iteration(*p, interval_s, {avg, grad_norm, params_norm, nan_iterations}, timer_seconds);
}

void Trainer::log_iteration(const PendingLog& p, double interval_s, const LoggedValues& values,
                            const std::map<std::string, double>& timer_seconds) {
  const std::optional<double>&avg = values.avg_loss, &grad_norm = values.grad_norm;
  const int64_t nan_iterations = values.nan_iterations;
  const double ms = interval_s * 1e3 / double(std::max<int64_t>(p.iterations, 1));
  const double flops = model_flops_per_iteration(cfg_.model, gpt_->padded_vocab_size, p.global_batch);
  const double tflops = flops / (ms * 1e-3 * groups_.grid.world() * 1e12);
  const double samples_per_s = double(p.global_batch) / (ms * 1e-3);
  const double tokens_per_s = samples_per_s * cfg_.model.seq_length;
  const std::optional<DeviceMemory> mem = device_memory(gpt_->device);
  if (mem && !memory_reported_ && groups_.coords.dp == 0) {  // Megatron's report_memory, once, after the first log
    memory_reported_ = true;
    log_.info("(after ", p.iteration, " iterations) memory (MB) | allocated: ", fmt_f(mem->allocated_mib, 1),
              " | max allocated: ", fmt_f(mem->max_allocated_mib, 1), " | reserved: ", fmt_f(mem->reserved_mib, 1),
              " | max reserved: ", fmt_f(mem->max_reserved_mib, 1));
  }
  if (!logging_rank()) return;
  std::ostringstream line;
  line << " iteration " << std::setw(8) << p.iteration << "/" << std::setw(8) << train_iters_
       << " | consumed samples: " << std::setw(12) << p.consumed_train << " | consumed tokens: " << std::setw(14)
       << p.consumed_tokens << " | elapsed time per iteration (ms): " << fmt_f(ms, 1)
       << " | learning rate: " << fmt_e(p.lr) << " | global batch size: " << std::setw(5) << p.global_batch << " |";
  if (avg) line << " lm loss: " << fmt_e(*avg) << " |";
  if (p.loss_scale) line << " loss scale: " << fmt_f(*p.loss_scale, 1) << " |";
  if (grad_norm) line << " grad norm: " << fmt_f(*grad_norm, 3) << " |";
  if (p.num_zeros) line << " num zeros: " << *p.num_zeros << " |";
  if (values.params_norm) line << " params norm: " << fmt_f(*values.params_norm, 3) << " |";
  line << " number of skipped iterations: " << std::setw(3) << p.skipped
       << " | number of nan iterations: " << std::setw(3) << nan_iterations
       << " | samples per second: " << fmt_f(samples_per_s, 3) << " | TFLOPs: " << fmt_f(tflops, 2)
       << " | tokens per second: " << fmt_f(tokens_per_s, 1) << " |";
  out_ << line.str() << std::endl;
  const double left_s = double(train_iters_ - p.iteration) * ms * 1e-3;
  log_.info(fmt_f(100.0 * double(p.iteration) / double(std::max<int64_t>(train_iters_, 1)), 1), "% ", p.iteration, "/",
            train_iters_, " iterations, ", fmt_f(1e3 / ms, 2), " it/s, ETA ", format_duration(left_s));

  const int64_t it = p.iteration, samples = p.consumed_train, tokens = p.consumed_tokens;
  if (tb_ && it % std::max(1, cfg_.logging.tensorboard_log_interval) == 0) {
    const auto& lg = cfg_.logging;
    if (lg.log_learning_rate_to_tensorboard) tb_->add_scalar_vs_progress("learning-rate", p.lr, it, samples, tokens);
    if (lg.log_batch_size_to_tensorboard)
      tb_->add_scalar_vs_progress("batch-size", double(p.global_batch), it, samples, tokens);
    if (avg) tb_->add_scalar_vs_progress("lm loss", *avg, it, samples, tokens);
    if (p.loss_scale && lg.log_loss_scale_to_tensorboard)
      tb_->add_scalar_vs_progress("loss-scale", *p.loss_scale, it, samples, tokens);
    if (grad_norm) tb_->add_scalar_vs_progress("grad-norm", *grad_norm, it, samples, tokens);
    if (p.num_zeros) tb_->add_scalar_vs_progress("num-zeros", double(*p.num_zeros), it, samples, tokens);
    if (values.params_norm) tb_->add_scalar_vs_progress("params-norm", *values.params_norm, it, samples, tokens);
    tb_->add_scalar("iteration-time", ms * 1e-3, it);
    tb_->add_scalar("samples-per-second", samples_per_s, it);
    tb_->add_scalar("tokens-per-second", tokens_per_s, it);
    tb_->add_scalar("TFLOPs", tflops, it);
    if (cfg_.logging.log_timers_to_tensorboard)
      for (const auto& [name, sec] : timer_seconds) tb_->add_scalar(name + "-time", sec * 1e3, it);
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
    for (const auto& [name, sec] : timer_seconds) im.extra["timer_ms"][name] = sec * 1e3;
    if (mem) {
      im.extra["mem_max_allocated_mib"] = mem->max_allocated_mib;
      im.extra["mem_max_reserved_mib"] = mem->max_reserved_mib;
    }
    metrics_->write(im);
  }
}

int Trainer::agree_on_stop(double elapsed_min) {
  const auto& t = cfg_.training;
  int reason = kNone;
  if (signals_->received() != 0) reason = std::max<int>(reason, kSignal);
  if (!t.kill_switch_path.empty() && std::filesystem::exists(t.kill_switch_path))
    reason = std::max<int>(reason, kKillSwitch);
  if (t.exit_duration_in_mins > 0 && elapsed_min > double(t.exit_duration_in_mins))
    reason = std::max<int>(reason, kDuration);
  if (t.exit_interval > 0 && iteration_ % t.exit_interval == 0) reason = std::max<int>(reason, kExitInterval);
  // Agreed over MPI on the host: a device all-reduce here would make every iteration wait for the GPU to drain.
  torch::Tensor r = torch::tensor({float(reason)});
  groups_.host->all_reduce(r, dist::ReduceOp::kMax);
  return static_cast<int>(r.item<float>());
}

int Trainer::run() {
  const auto& t = cfg_.training;
  Timer wall;
  wall.start();
  if (t.eval_only) {
    evaluate();
    return 0;
  }
  for (const std::string& note : cfg_.deepspeed_notes)
    log_.info0("--deepspeed_config ", t.deepspeed_config, ": ", note);
  log_.info0("training: ", train_iters_, " iterations from iteration ", iteration_, ", global batch ",
             micro_->global_batch_size(), ", micro-batch ", t.micro_batch_size, ", ",
             interleaved()                ? "interleaved 1F1B pipeline"
             : groups_.grid.pp_size() > 1 ? "1F1B pipeline"
                                          : "no pipeline",
             dp_->zero1() ? ", ZeRO-1" : "");
  if (t.train_tokens > 0)
    log_.info0("--train-tokens ", t.train_tokens, ": training ends once that many tokens are consumed (",
               consumed_tokens_, " so far)");
  interval_start_ = mark_now(clock_);
  int64_t in_interval = 0;
  int stop = kNone;
  StepProfiler profiler(cfg_.logging, env_.rank, gpt_->device.is_cuda());
  const auto& lg = cfg_.logging;
  if (lg.profile && (lg.profile_step_end > train_iters_ || lg.profile_step_start < iteration_))
    log_.warn0("--profile: iterations ", lg.profile_step_start + 1, "..", lg.profile_step_end,
               " are not all in this run (iterations ", iteration_ + 1, "..", train_iters_,
               "): no profile will be written");
  warn_if_gemm_epilogue_unused();
  const auto token_budget_spent = [&] { return t.train_tokens > 0 && consumed_tokens_ >= t.train_tokens; };
  while (iteration_ < train_iters_ && !token_budget_spent()) {
    profiler.before_step(iteration_);
    // Whether this iteration (number iteration_ + 1 once done) ends on a log line: known before it runs, so that what
    // only a log line shows is computed in that iteration only.
    const bool log_point = (iteration_ + 1) % std::max(1, t.log_interval) == 0 || iteration_ + 1 == train_iters_;
    const StepOutcome s = train_step(log_point);
    // The last log point's line: its iteration ran on the device while this one was queued behind it, so waiting
    // for it here leaves the device with work (a log line that drained the queue cost ~1.3 ms of idle GPU at 124M).
    flush_log();
    ++iteration_;
    const std::string profile = profiler.after_step(iteration_);
    if (!profile.empty())
      log_.info("profile of iterations ", cfg_.logging.profile_step_start + 1, "..", iteration_, " written: ", profile);
    ++in_interval;
    consumed_train_ += s.global_batch;
    consumed_tokens_ += s.global_batch * cfg_.model.seq_length;
    if (s.updated) lr_->step(s.global_batch, consumed_tokens_);
    optimizer_->set_lr(lr_->lr());
    if (!s.skipped_data) {
      if (!s.updated) ++skipped_in_interval_;
      if (s.loss.defined()) pending_losses_.emplace_back(s.loss, s.updated);
    }
    if (log_point) {
      capture_log(s, in_interval);  // written after the next iteration is queued (flush_log above)
      in_interval = 0;
    }
    if (t.eval_interval > 0 && iteration_ % t.eval_interval == 0 && iteration_ < train_iters_) {
      flush_log();
      evaluate();
    }
    const bool save_now = cfg_.checkpoint.save_interval > 0 && iteration_ % cfg_.checkpoint.save_interval == 0;
    if (save_now) {
      flush_log();
      save();
    }
    const double elapsed_min = wall.elapsed(false) / 60.0;
    stop = agree_on_stop(elapsed_min);
    if (stop != kNone) break;
  }
  flush_log();
  if (stop == kNone) evaluate();
  if (cfg_.checkpoint.save.empty() && stop != kNone)
    log_.warn0("stopping early without --save: no checkpoint is written");
  save();
  // The token budget is a normal end (final evaluation and save), the same on every rank: Megatron-DeepSpeed's loop
  // condition `consumed_train_tokens < train_tokens`.
  log_.info0("stopping at iteration ", iteration_, ": ",
             stop == kNone && token_budget_spent() ? "--train-tokens reached" : stop_reason_name(stop));
  // A signal means the job was interrupted (time limit, preemption): exit code 7 tells the launcher so; the other
  // triggers are asked-for ends of training and exit 0, as in Megatron.
  return stop == kSignal ? static_cast<int>(ExitCode::kInterrupted) : 0;
}

void Trainer::warn_if_gemm_epilogue_unused() const {
  const cli::ModelArgs& m = cfg_.model;
  if (!m.gemm_epilogue_fusion) return;
  const bool tanh_gelu = ops::activation_from_flags(m.glu_activation, m.openai_gelu, !m.no_bias_gelu_fusion) ==
                         ops::Activation::kGeluTanh;  // what TransformerLayer takes the fused MLP for
  const bool half = cfg_.precision.bf16 || cfg_.precision.fp16;
  if (!tanh_gelu || !half || !gpt_->device.is_cuda())
    log_.warn0("--gemm-epilogue-fusion: not applied (it needs a CUDA device, --bf16 or --fp16, and the tanh GELU MLP: ",
               "not --glu-activation, not --no-bias-gelu-fusion without --openai-gelu); the MLP runs on ATen");
}

}  // namespace megaton::train
