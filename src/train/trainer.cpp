#include "train/trainer.h"

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "checkpoint/format.h"
#include "core/device_clock.h"
#include "core/device_memory.h"
#include "core/error.h"
#include "core/format.h"
#include "data/dataset_builder.h"
#include "data/tokenizer.h"
#include "dist/mpi_session.h"
#include "dist/timed_communicator.h"
#include "ops/activations.h"
#include "optim/grad_scaler.h"
#include "optim/lr_scheduler.h"
#include "optim/microbatches.h"
#include "optim/optimizer.h"
#include "parallel/data/data_parallel.h"
#include "train/batches.h"
#include "train/checkpointing.h"
#include "train/codecarbon.h"
#include "train/iteration_log.h"
#include "train/layout_estimate.h"
#include "train/step_profiler.h"
#include "train/stop_conditions.h"
#include "train/train_step.h"
#include "train/training_model.h"
#include "train/validation.h"

namespace megaton::train {

namespace {

// What training reads of the tokenizer: the vocabulary, the end-of-document id (-1 without tokenizer files:
// --vocab-size for pre-tokenized data) and, for packed prompts, the padding id. UsageError where a flag needs what is
// missing.
struct Vocabulary {
  int64_t size = 0, eod = -1, pad = -1;
};

Vocabulary vocabulary(const TrainConfig& c) {
  Vocabulary v;
  v.size = c.vocab_size;
  if (!c.tokenizer.tokenizer_type.empty()) {
    auto tok = data::make_tokenizer(c.tokenizer);
    v.size = tok->vocab_size();
    v.eod = tok->eod();
    if (c.data.packed()) v.pad = tok->pad();
  }
  MEGATON_CHECK(v.size > 0, UsageError, "megaton train needs --tokenizer-type (with its files) or --vocab-size");
  MEGATON_CHECK(!c.data.eod_mask_loss || v.eod >= 0, UsageError, "--eod-mask-loss needs a tokenizer (its EOD id)");
  MEGATON_CHECK(!(c.data.reset_position_ids || c.data.reset_attention_mask) || v.eod >= 0, UsageError,
                "--reset-position-ids / --reset-attention-mask need a tokenizer (its EOD id)");
  MEGATON_CHECK(!c.data.packed() || v.pad >= 0, UsageError,
                "packed prompts need a tokenizer with a padding token (--tokenizer-type PretrainedFromHF)");
  return v;
}

// Megatron's argument listing: to `out` at --log-level info or below, and to --log-path DIR/args_<time>.txt.
void report_arguments(const TrainConfig& c, const Logger& log, std::ostream& out) {
  if (c.arguments.empty()) return;
  if (log.level() <= LogLevel::kInfo) {
    out << "------------------------ arguments ------------------------\n";
    for (const std::string& line : c.arguments) out << line << "\n";
    out << "-------------------- end of arguments ---------------------" << std::endl;
  }
  if (c.logging.log_path.empty()) return;
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", std::localtime(&now));
  const std::filesystem::path file = std::filesystem::path(c.logging.log_path) / str("args_", stamp, ".txt");
  std::error_code ec;
  std::filesystem::create_directories(c.logging.log_path, ec);
  std::ofstream f(file);
  for (const std::string& line : c.arguments) f << line << "\n";
  f.flush();
  MEGATON_CHECK(f.good(), UsageError, "--log-path ", c.logging.log_path, ": cannot write ", file.string(),
                ec ? str(" (", ec.message(), ")") : "");
}

}  // namespace

Trainer::Trainer(TrainConfig cfg, const dist::LaunchEnv& env, std::ostream& out)
    : cfg_(std::move(cfg)),
      env_(env),
      out_(out),
      log_(env.rank, env.size, parse_log_level(cfg_.logging.level_for_rank(env.rank))),
      groups_{dist::RankGrid(env.size, cfg_.parallel.tensor_model_parallel_size,
                             cfg_.parallel.pipeline_model_parallel_size)} {
  const auto& p = cfg_.parallel;
  const auto& t = cfg_.loop;
  if (env_.rank == 0) report_arguments(cfg_, log_, out_);
  // Everything that can be refused is refused here, before the first collective.
  MEGATON_CHECK(!cfg_.data.data_path.empty() || cfg_.data.uses_weighted_split_paths(), UsageError,
                "megaton train needs --data-path (a preprocessed PREFIX, or W1 P1 W2 P2 ...) or "
                "--train-weighted-split-paths[-path]");
  TrainStep::Options so;
  skip_ranges_ = std::make_unique<SkipRanges>(t.skip_train_iteration_range);
  if (cfg_.curriculum.enabled) curriculum_ = std::make_unique<CurriculumScheduler>(cfg_.curriculum);
  const torch::Device device(dist::select_device(cfg_.dist.device, env_.local_rank));
  if (cfg_.precision.fp16 && !device.is_cuda()) {
    // LibTorch 1.13 has no fp16 matrix multiply on CPU: say so before anything is built, not mid-iteration.
    try {
      const torch::Tensor a = torch::ones({2, 2}, torch::kHalf);
      (void)torch::matmul(a, a);
    } catch (const c10::Error&) {
      throw UsageError("--fp16 on CPU: this LibTorch has no fp16 matrix multiply on CPU; use --bf16, or a GPU");
    }
  }
  const Vocabulary words = vocabulary(cfg_);
  const int64_t vocab = words.size, eod = words.eod;
  model::GptConfig gpt;
  gpt.model = cfg_.model;
  gpt.kernels = cfg_.kernels;
  gpt.fp8 = cfg_.fp8;
  gpt.vocab_size = vocab;
  gpt.padded_vocab_size = cfg_.model.padded_vocab_size(vocab, p.tensor_model_parallel_size);
  gpt.seed = static_cast<uint64_t>(t.seed);
  gpt.dtype = cfg_.precision.dtype();
  gpt.device = device;
  gpt.pp_partition_method = p.pp_partition_method;
  model::validate_gpt_config(gpt, p.tensor_model_parallel_size, p.pipeline_model_parallel_size);
  const dist::Backend backend = dist::parse_backend(cfg_.dist.distributed_backend, device.is_cuda());

  timers_.set_device_clock(device_clock(device));  // CUDA events on the GPU: timing never waits for the device
  groups_ = dist::build_process_groups(groups_.grid, backend, cfg_.dist.distributed_timeout_minutes * 60.0);
  // The data-parallel and pipeline groups' operations are timed: the log's exposed communication.
  groups_.dp = dist::timed(groups_.dp, timers_, "dp-comm");
  groups_.pp = dist::timed(groups_.pp, timers_, "pp-comm");
  log_.set_coords(groups_.coords.tp, groups_.coords.pp, groups_.coords.dp);
  log_.info0("megaton ", data::objective_command(cfg_.data.objective), ": ", groups_.grid.describe(), " on ",
             device.str());
  stop_ = std::make_unique<StopConditions>(cfg_.loop, groups_);
  if (stop_->kill_switch_at_start()) {  // as the fork: exit before anything is loaded, saved or trained
    log_.info0("kill switch ", t.kill_switch_path, " found at start: exiting without training");
    killed_at_start_ = true;
    return;
  }

  refuse_if_state_cannot_fit(gpt.padded_vocab_size, device);
  model_ = std::make_unique<TrainingModel>(std::move(gpt), groups_, p.num_layers_per_virtual_pipeline_stage, log_);
  parallel::DataParallelOptions dpo;
  dpo.bucket_size_mb = static_cast<double>(p.dp_bucket_size_mb);
  dpo.overlap_grad_reduce = p.overlap_grad_reduce;
  dpo.overlap_param_gather = p.overlap_param_gather;
  dpo.zero1 = p.zero_stage == 1;
  dp_ = std::make_unique<parallel::DataParallel>(model_->params(), groups_, dpo);
  // --overlap-param-gather: each forward waits for its parameters' all-gather, bucket by bucket.
  if (dp_->overlaps_param_gather())
    model_->set_before_use([dp = dp_.get()](size_t begin, size_t end) { dp->wait_param_gather(begin, end); });
  // Gradient accumulation fusion: the linear layers' weight-gradient GEMMs add into DataParallel's fp32 main grads
  // (each one's first gradient of an iteration writes instead of adding: DataParallel does not zero them).
  if (cfg_.kernels.gradient_accumulation_fusion)
    for (int k = 0; k < model_->num_chunks(); ++k) {
      model_->chunk(k).main_grads().bind(dp_->param_buffer(), dp_->grad_buffer());
      dp_->attach(model_->chunk(k).main_grads());
    }
  optimizer_ = std::make_unique<optim::MixedPrecisionOptimizer>(*dp_, groups_, cfg_.optimizer,
                                                                optim::make_grad_scaler(cfg_.precision));

  micro_ = std::make_unique<optim::NumMicroBatchesCalculator>(optim::make_num_micro_batches_calculator(
      t.global_batch_size, t.micro_batch_size, t.rampup_batch_size, groups_.grid.dp_size()));
  train_iters_ = t.train_iters > 0 ? t.train_iters : optim::train_iters_for_samples(t.train_samples, *micro_);
  lr_ = std::make_unique<optim::AnnealingLR>(cfg_.lr.scheduler(train_iters_, t.train_samples, t.global_batch_size));

  // Datasets: Megatron's sample counts for the three splits.
  const int64_t gbs = micro_->global_batch_size();
  const int64_t eval_runs = t.eval_interval > 0 ? train_iters_ / t.eval_interval + 1 : 1;
  const std::array<int64_t, 3> counts{t.train_samples > 0 ? t.train_samples : train_iters_ * gbs,
                                      eval_runs * t.eval_iters * gbs, t.eval_iters * gbs};
  auto sets = data::build_train_valid_test_datasets(
      cfg_.data, cfg_.model.seq_length, static_cast<uint32_t>(t.seed), counts, log_, groups_.rank == 0,
      [this] { groups_.world->barrier(); }, words.pad);
  train_ds_ = sets.train;
  MEGATON_CHECK(train_ds_ != nullptr, UsageError, "--split gives the train split no documents; nothing to train on");

  iteration_log_ =
      std::make_unique<IterationLog>(IterationLog::Context{model_->config(), groups_, *optimizer_, timers_, out_, log_,
                                                           gigaflos_per_token(), cfg_.curriculum.enabled},
                                     cfg_.logging, train_iters_);
  report_memory();

  so.micro_batch_size = t.micro_batch_size;
  so.batch = {cfg_.data.eod_mask_loss, cfg_.data.reset_position_ids, cfg_.data.reset_attention_mask, eod, device};
  so.batch.objective = cfg_.data.objective;
  so.batch.loss_on_targets_only = cfg_.data.loss_on_targets_only;
  so.batch.reweight_loss = cfg_.data.reweight_loss;
  so.batch.norm_target_loss = cfg_.data.norm_target_loss;
  so.batch.pad = words.pad;
  so.batch.seed = static_cast<uint32_t>(t.seed);
  so.batch.absolute_positions = cfg_.model.position_embedding_type == "absolute";
  so.sync_tp_duplicated_parameters = p.sync_tp_duplicated_parameters;
  // Every stage's attention reads the documents: --reset-attention-mask's, or the prefixes and prompts.
  so.documents_on_every_stage = cfg_.data.reset_attention_mask || cfg_.data.objective != data::Objective::kCausalLm;
  step_ = std::make_unique<TrainStep>(
      TrainStep::Parts{*model_, *dp_, *optimizer_, *micro_, *train_ds_, groups_, timers_}, so);
  Validation::Options vo{t.micro_batch_size, t.eval_iters, so.batch, step_->reads_data()};
  validation_ = std::make_unique<Validation>(*model_, sets.valid_groups, *micro_, groups_, *iteration_log_, vo);
  checkpoints_ = std::make_unique<TrainCheckpoints>(TrainCheckpoints::Parts{*model_, *optimizer_, *lr_, groups_, log_},
                                                    cfg_, env_.job_id);
  checkpoints_->load(progress_);
  checkpoints_->reserve_host_memory();
  optimizer_->set_lr(lr_->lr());
}

Trainer::~Trainer() = default;

double Trainer::gigaflos_per_token() const {
  // megatron/utils.py: non_embedding_params (this rank's parameters but the word and position embeddings) times the
  // model-parallel size, in billions; the fork adds 6 x samples x seq_length x that per iteration.
  int64_t n = 0;
  for (const auto& pi : model_->params()) {
    const std::string& name = pi.name;
    const auto ends_with = [&](const std::string& tail) {
      return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
    };
    if (!ends_with("word_embeddings.weight") && !ends_with("position_embeddings.weight")) n += pi.param.numel();
  }
  return 6.0 * double(n) * double(groups_.grid.tp_size() * groups_.grid.pp_size()) / 1e9;
}

void Trainer::report_memory() const {
  int64_t n = 0;
  for (const auto& pi : model_->params()) n += pi.param.numel();
  const double mib = 1024.0 * 1024.0;
  const double weights = double(dp_->param_buffer().numel() * dp_->param_buffer().element_size()) / mib;
  const double grads = double(dp_->grad_buffer().numel() * 4) / mib;
  const bool separate_master = model_->config().dtype != torch::kFloat32 || !dp_->shard_is_whole();
  const double opt = double(optimizer_->moment_bytes() + dp_->shard_numel() * 4 * (separate_master ? 1 : 0)) / mib +
                     (dp_->shard_is_whole() ? 0.0 : double(dp_->shard_numel() * 4) / mib);
  if (groups_.coords.dp == 0)
    log_.info("number of parameters on (tensor, pipeline) model parallel rank (", groups_.coords.tp, ", ",
              groups_.coords.pp, "): ", n, " | memory per rank: weights ", fixed(weights, 2), " MiB, fp32 grads ",
              fixed(grads, 2), " MiB, optimizer state ", fixed(opt, 2), " MiB",
              dp_->zero1() ? " (ZeRO-1 shard 1/" + std::to_string(dp_->dp_size()) + ")" : "", ", total ",
              fixed(weights + grads + opt, 2), " MiB");
}

int Trainer::run() {
  if (killed_at_start_) return 0;
  const auto& t = cfg_.loop;
  if (t.eval_only) {
    validation_->run(progress_);
    return 0;
  }
  for (const std::string& note : cfg_.notes) log_.info0(note);
  if (!cfg_.codecarbon.dir.empty())  // collective; rows at each save and at the end, as the fork flushes its tracker
    codecarbon_ = std::make_unique<CodecarbonTracker>(cfg_.codecarbon, *groups_.host, model_->config().device, log_);
  log_.info0("training: ", train_iters_, " iterations from iteration ", progress_.iteration, ", global batch ",
             micro_->global_batch_size(), ", micro-batch ", t.micro_batch_size, ", ",
             cfg_.parallel.interleaved()  ? "interleaved 1F1B pipeline"
             : groups_.grid.pp_size() > 1 ? "1F1B pipeline"
                                          : "no pipeline",
             dp_->zero1() ? ", ZeRO-1" : "",
             dp_->overlaps_param_gather() ? " (parameter all-gather overlapped with the forward)" : "");
  if (t.train_tokens > 0)
    log_.info0("--train-tokens ", t.train_tokens, ": training ends once that many tokens are consumed (",
               progress_.consumed_train_tokens, " so far)");
  iteration_log_->start();
  const TrainingProgress at_start = progress_;
  const auto started = std::chrono::steady_clock::now();
  int64_t in_interval = 0;
  StopReason stop = StopReason::kNone;
  StepProfiler profiler(cfg_.logging, env_.rank, model_->config().device.is_cuda());
  const auto& lg = cfg_.logging;
  if (lg.profile && (lg.profile_step_end > train_iters_ || lg.profile_step_start < progress_.iteration))
    log_.warn0("--profile: iterations ", lg.profile_step_start + 1, "..", lg.profile_step_end,
               " are not all in this run (iterations ", progress_.iteration + 1, "..", train_iters_,
               "): no profile will be written");
  warn_if_gemm_epilogue_unused();
  if (curriculum_) {  // the scheduler's state at the loaded iteration, as DeepSpeed's checkpoint restores it
    for (int64_t k = 1; k <= progress_.iteration; ++k) curriculum_->update(k);
    log_.info0("curriculum learning (", cfg_.curriculum.schedule_type, "): sequence length ",
               curriculum_->difficulty_at(progress_.iteration + 1), " at iteration ", progress_.iteration + 1,
               ", up to ", cfg_.curriculum.max_difficulty);
  }
  if (const auto stuck = skip_ranges_->start_at(progress_.iteration); stuck.second > 0)
    log_.warn0("--skip-train-iteration-range ", stuck.first, "-", stuck.second, " ends at iteration ",
               progress_.iteration, ", where this run starts: as in Megatron-DeepSpeed it is never applied and holds ",
               "back the ranges after it; give the ranges still ahead only");
  const auto token_budget_spent = [&] {
    return t.train_tokens > 0 && progress_.consumed_train_tokens >= t.train_tokens;
  };
  while (progress_.iteration < train_iters_ && !token_budget_spent()) {
    // --skip-train-iteration-range: data skipped, the iteration counter stays (train/skip_ranges.h).
    for (auto skip = skip_ranges_->take(progress_.iteration); skip.second > 0;
         skip = skip_ranges_->take(progress_.iteration)) {
      progress_.skipped_train_samples += skip.second * t.micro_batch_size * groups_.grid.dp_size();
      log_.info0("Skipped iterations ", skip.first.first, " to ", skip.first.second,
                 " due to --skip-train-iteration-range flag (", skip.second, " micro-batches of data; ",
                 progress_.skipped_train_samples, " samples skipped in this run)");
    }
    profiler.before_step(progress_.iteration);
    // Whether this iteration (number iteration + 1 once done) ends on a log line: known before it runs, so that what
    // only a log line shows is computed in that iteration only.
    const int64_t next = progress_.iteration + 1;
    const bool log_point = next % std::max(1, t.log_interval) == 0 || next == train_iters_;
    const int seq_length =
        curriculum_ ? static_cast<int>(curriculum_->update(progress_.iteration + 1)) : cfg_.model.seq_length;
    const StepOutcome s = step_->run(progress_, log_point, seq_length);
    // The last log point's line: its iteration ran on the device while this one was queued behind it, so waiting
    // for it here leaves the device with work (a log line that drained the queue cost ~1.3 ms of idle GPU at 124M).
    iteration_log_->flush();
    ++progress_.iteration;
    const std::string profile = profiler.after_step(progress_.iteration);
    if (!profile.empty())
      log_.info("profile of iterations ", lg.profile_step_start + 1, "..", progress_.iteration, " written: ", profile);
    ++in_interval;
    progress_.consumed_train_samples += s.global_batch;
    progress_.consumed_train_tokens += s.global_batch * s.seq_length;
    if (s.updated) lr_->step(s.global_batch, progress_.consumed_train_tokens);
    check_nonfinite(s.updated);
    optimizer_->set_lr(lr_->lr());
    iteration_log_->add_iteration(s, progress_);
    if (log_point) {
      iteration_log_->capture(s, progress_, in_interval);  // written after the next iteration is queued
      in_interval = 0;
    }
    if (t.eval_interval > 0 && progress_.iteration % t.eval_interval == 0 && progress_.iteration < train_iters_) {
      iteration_log_->flush();
      validation_->run(progress_);
    }
    checkpoints_->poll();  // --async-save: a background save ended (or failed) on every rank
    const int64_t save_interval = cfg_.checkpoint.save_interval;
    if (save_interval > 0 && progress_.iteration % save_interval == 0) {
      iteration_log_->flush();
      checkpoints_->save(progress_);
      if (codecarbon_) codecarbon_->flush(progress_.iteration);
    }
    stop = stop_->agree(progress_.iteration);
    if (stop != StopReason::kNone) break;
  }
  iteration_log_->flush();
  if (stop == StopReason::kNone) validation_->run(progress_);
  if (!checkpoints_->saving() && stop != StopReason::kNone)
    log_.warn0("stopping early without --save: no checkpoint is written");
  checkpoints_->save(progress_);
  checkpoints_->finish();  // --async-save: the last checkpoint is on disk before the job ends
  if (codecarbon_) codecarbon_->flush(progress_.iteration);
  // The token budget is a normal end (final evaluation and save), the same on every rank: Megatron-DeepSpeed's loop
  // condition `consumed_train_tokens < train_tokens`.
  log_.info0("stopping at iteration ", progress_.iteration, ": ",
             stop == StopReason::kNone && token_budget_spent() ? "--train-tokens reached" : stop_reason_name(stop));
  log_summary(at_start, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  return 0;  // every stop that was asked for saved what it was asked to: a success, as in Megatron-DeepSpeed
}

void Trainer::log_summary(const TrainingProgress& at_start, double seconds) const {
  const int64_t iters = progress_.iteration - at_start.iteration;
  const int64_t tokens = progress_.consumed_train_tokens - at_start.consumed_train_tokens;
  const int64_t samples = progress_.consumed_train_samples - at_start.consumed_train_samples;
  const std::string rates = str(fixed(seconds, 1), " s (", fixed(iters > 0 ? seconds / iters : 0.0, 3),
                                " s/iteration, ", fixed(seconds > 0 ? tokens / seconds : 0.0, 0), " tokens/s)");
  const int64_t saved = checkpoints_->last_saved();
  const std::string ran = iters > 0 ? str("iterations ", at_start.iteration + 1, "..", progress_.iteration, " (", iters,
                                          " in this run), ", samples, " samples and ", tokens, " tokens in ", rates)
                                    : str("no iteration ran (at iteration ", progress_.iteration, ")");
  log_.info0("summary: ", ran, "; consumed in all: ", progress_.consumed_train_samples, " samples, ",
             progress_.consumed_train_tokens, " tokens; ",
             !checkpoints_->saving() ? std::string("no --save")
             : saved >= 0 ? str("newest checkpoint ", cfg_.checkpoint.save, "/", checkpoint::iteration_dir_name(saved))
                          : std::string("no checkpoint saved"));
}

void Trainer::refuse_if_state_cannot_fit(int64_t padded_vocab, const torch::Device& device) const {
  const auto& t = cfg_.loop;
  const MemoryEstimate m = estimate_memory(cfg_.model, cfg_.kernels, cfg_.parallel, t.micro_batch_size,
                                           t.num_micro_batches, cfg_.precision, padded_vocab, cfg_.optimizer.use_bnb);
  const double state_gib = m.weights_gib + m.grads_gib + m.optimizer_gib;  // exact sizes, unlike the activations
  const double capacity_gib = static_cast<double>(device_capacity_bytes(device)) / (1024.0 * 1024.0 * 1024.0);
  MEGATON_CHECK(state_gib <= capacity_gib, UsageError, "the model needs ", fixed(state_gib, 1),
                " GiB per rank for its weights, gradients and optimizer state (", m.params_on_rank,
                " parameters on the busiest rank: --num-layers ", cfg_.model.num_layers, ", --hidden-size ",
                cfg_.model.hidden_size, ", --max-position-embeddings ", cfg_.model.max_position_embeddings,
                ", padded vocabulary ", padded_vocab, "), more than the ", fixed(capacity_gib, 1), " GiB of ",
                device.str(), "; use a smaller model or more tensor/pipeline-parallel ranks");
  // --async-save copies this rank's weights and optimizer state to host memory at each save.
  const double gib = 1024.0 * 1024.0 * 1024.0;
  const int node_ranks = std::max(1, env_.local_size);
  const double host_gib = (m.weights_gib + m.optimizer_gib) * node_ranks;
  const int64_t available = host_available_bytes();
  MEGATON_CHECK(!cfg_.checkpoint.async_save || cfg_.checkpoint.save.empty() || available < 0 ||
                    host_gib <= 0.9 * static_cast<double>(available) / gib,
                UsageError, "--async-save: the host copies of the state need ", fixed(host_gib, 1),
                " GiB on this node (", fixed(m.weights_gib + m.optimizer_gib, 2), " GiB for each of its ", node_ranks,
                " ranks), more than the ", fixed(static_cast<double>(available) / gib, 1),
                " GiB of host memory available; leave --async-save out");
  // The activation estimate is approximate: only a request far beyond the device is refused here.
  MEGATON_CHECK(m.total_gib() <= 4 * capacity_gib, UsageError, "the model needs about ", fixed(m.total_gib(), 1),
                " GiB per rank with its activations (--seq-length ", cfg_.model.seq_length, ", --micro-batch-size ",
                t.micro_batch_size, "), far more than the ", fixed(capacity_gib, 1), " GiB of ", device.str(),
                "; use a shorter --seq-length, a smaller --micro-batch-size, or more model-parallel ranks");
}

void Trainer::check_nonfinite(bool updated) {
  if (updated || optimizer_->grad_scaler()) {
    nan_run_ = 0;
    return;
  }
  ++nan_run_;
  log_.warn0("iteration ", progress_.iteration, ": NaN or inf in the gradients, the update was skipped (", nan_run_,
             " in a row)");
  const int64_t limit = cfg_.loop.max_nan_iterations;
  MEGATON_CHECK(limit == 0 || nan_run_ < limit, RuntimeError, "iteration ", progress_.iteration,
                ": the gradients held NaN or inf in ", nan_run_,
                " iterations in a row (--max-nan-iterations); their updates were skipped, so the parameters and the "
                "checkpoints stay finite. Training diverged: lower --lr or raise --lr-warmup-iters, check the data, "
                "and resume from the last checkpoint");
}

void Trainer::warn_if_gemm_epilogue_unused() const {
  if (!cfg_.kernels.gemm_epilogue_asked) return;
  const model::GptOptions& m = cfg_.model;
  const bool tanh_gelu = ops::activation_from_flags(m.glu_activation, m.openai_gelu, m.bias_gelu_fusion) ==
                         ops::Activation::kGeluTanh;  // what TransformerLayer takes the fused MLP for
  if (!tanh_gelu || !cfg_.precision.half() || !model_->config().device.is_cuda())
    log_.warn0("--gemm-epilogue-fusion: not applied (it needs a CUDA device, --bf16 or --fp16, and the tanh GELU MLP: ",
               "not --glu-activation, not --no-bias-gelu-fusion without --openai-gelu); the MLP runs on ATen");
}

}  // namespace megaton::train
