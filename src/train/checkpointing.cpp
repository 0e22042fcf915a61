#include "train/checkpointing.h"

#include <chrono>
#include <cstdio>

#include "checkpoint/checkpoint.h"
#include "checkpoint/collective.h"
#include "core/format.h"
#include "core/timer.h"
#include "train/training_state.h"

namespace megaton::train {

namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

TrainCheckpoints::TrainCheckpoints(Parts parts, const TrainConfig& config, std::string job_id)
    : p_(parts), config_(config), options_(config.checkpoint), job_id_(std::move(job_id)) {
  if (options_.async_save && !options_.save.empty()) background_ = std::make_unique<checkpoint::BackgroundSave>();
}

TrainCheckpoints::~TrainCheckpoints() = default;

void TrainCheckpoints::load(TrainingProgress& progress) {
  const auto& c = options_;
  if (c.load.empty()) return;
  checkpoint::LoadOptions lo;
  lo.load_optim = c.load_optim && !c.finetune;
  lo.load_rng = c.load_rng && !c.finetune;
  lo.finetune = c.finetune;
  lo.expected_model_config = model::architecture_json(p_.model.config());
  checkpoint::OptimState optim_state = to_checkpoint_optim(p_.optimizer.state_dict());
  checkpoint::RngState rng_state = rng_to_checkpoint(p_.model.rng());
  parallel::ParamList params = p_.model.params();
  auto r = checkpoint::load_checkpoint(c.load, params, lo.load_optim ? &optim_state : nullptr,
                                       lo.load_rng ? &rng_state : nullptr, p_.groups, lo, p_.log);
  if (!r) return;
  progress.iteration = r->iteration;
  if (!c.finetune) {
    const auto& st = r->meta.state;
    try {
      progress.consumed_train_samples = st.value("consumed_train_samples", int64_t{0});
      progress.consumed_valid_samples = st.value("consumed_valid_samples", int64_t{0});
      progress.consumed_train_tokens = st.value("consumed_train_tokens", int64_t{0});
      // As Megatron: --no-load-optim skips the learning-rate scheduler too (the command line's schedule starts over).
      // --reset-progress starts the command line's schedule over as well.
      if (lo.load_optim && !c.reset_progress && st.contains("lr_scheduler")) p_.lr.load_state_dict(st["lr_scheduler"]);
      if (r->optim_loaded && st.contains("optimizer")) p_.optimizer.load_scalar_state(st["optimizer"]);
      if (p_.model.fp8() && st.contains("fp8")) p_.model.load_fp8_state(st["fp8"]);
      if (p_.model.fp8() && !st.contains("fp8"))
        p_.log.warn0("--fp8-format: ", r->path, " has no FP8 scaling state (saved without FP8): scales start at 1");
    } catch (const nlohmann::json::exception& e) {
      throw CheckpointError(str(r->path, ": meta/state.json is malformed (", e.what(), ")"));
    }
    MEGATON_CHECK(progress.consumed_train_samples >= 0 && progress.consumed_valid_samples >= 0 &&
                      progress.consumed_train_tokens >= 0,
                  CheckpointError, r->path, ": meta/state.json holds negative consumed samples or tokens");
  }
  if (r->optim_loaded)
    p_.optimizer.load_state_dict(from_checkpoint_optim(optim_state));
  else
    p_.optimizer.reload_model_params();
  if (r->rng_loaded) {
    const dist::RankGrid& g = p_.groups.grid;
    if (r->saved_layout == checkpoint::SavedLayout{g.tp_size(), g.pp_size(), g.dp_size(), g.world()})
      rng_from_checkpoint(rng_state, p_.model.rng());
    else
      p_.log.warn0("checkpoint saved at another layout: dropout RNG states start fresh");
  }
  if (c.reset_progress) {  // the fork's --reset-progress: the run starts over on the loaded state
    progress = TrainingProgress{};
    p_.log.info0("--reset-progress: iteration and consumed samples start at 0");
  }
  last_saved_ = progress.iteration;
  p_.log.info0("loaded ", r->path, " at iteration ", progress.iteration, ", consumed samples ",
               progress.consumed_train_samples, r->optim_loaded ? "" : " (model weights only)");
}

void TrainCheckpoints::save(const TrainingProgress& progress) {
  const auto& c = options_;
  if (c.save.empty() || last_saved_ == progress.iteration) return;
  if (background_ && background_->in_flight()) {
    if (background_->iteration() == progress.iteration) return;  // this state is being written already
    finish();
  }
  Timer took;  // host clock: the save is host work (device-to-host copies and file writes)
  took.start();
  checkpoint::CheckpointState st;
  st.iteration = progress.iteration;
  st.state = {{"consumed_train_samples", progress.consumed_train_samples},
              {"consumed_valid_samples", progress.consumed_valid_samples},
              {"consumed_train_tokens", progress.consumed_train_tokens},
              {"lr_scheduler", p_.lr.state_dict()},
              {"optimizer", p_.optimizer.scalar_state()}};
  if (p_.model.fp8()) st.state["fp8"] = gathered_fp8_state();
  st.model_config = model::architecture_json(p_.model.config());
  st.args = args_json(config_);
  checkpoint::SaveOptions so;
  so.save_optim = c.save_optim;
  so.save_rng = c.save_rng;
  so.keep_last = c.keep_last;
  so.job_id = job_id_;
  so.io_timeout_s = config_.dist.distributed_timeout_minutes * 60.0;
  so.refuse_nonfinite = true;  // a diverged state never replaces a finite checkpoint
  const checkpoint::OptimState optim_state = to_checkpoint_optim(p_.optimizer.state_dict());  // collective (ZeRO)
  const checkpoint::RngState rng_state = rng_to_checkpoint(p_.model.rng());
  if (background_) {
    // The snapshot: every tensor copied into host buffers of its own, which training no longer touches.
    parallel::ParamList params = p_.model.params();
    checkpoint::OptimState optim = optim_state;
    checkpoint::RngState rng = rng_state;
    to_host(params, optim, rng, /*copy=*/true);
    const double blocked = took.elapsed();
    background_started_ = steady_seconds();
    const dist::ProcessGroups* groups = &p_.groups;
    const Logger* log = &p_.log;
    background_->start(progress.iteration, [=] {
      return checkpoint::save_checkpoint(c.save, st, params, so.save_optim ? &optim : nullptr,
                                         so.save_rng ? &rng : nullptr, *groups, so, *log);
    });
    p_.log.info0("checkpoint of iteration ", progress.iteration, ": the state copied to host memory in ",
                 fixed(blocked * 1e3, 1), " ms; writing it in the background");
    return;
  }
  const std::string dir =
      checkpoint::save_checkpoint(c.save, st, p_.model.params(), so.save_optim ? &optim_state : nullptr,
                                  so.save_rng ? &rng_state : nullptr, p_.groups, so, p_.log);
  last_saved_ = progress.iteration;
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.1f", took.elapsed() * 1e3);
  p_.log.info0("saved checkpoint at iteration ", progress.iteration, " to ", dir, " (", ms, " ms)");
}

nlohmann::json TrainCheckpoints::gathered_fp8_state() const {
  const auto& c = p_.groups.coords;
  const bool sender = c.tp == 0 && c.dp == 0;
  const std::vector<std::string> all = checkpoint::allgather_strings(sender ? p_.model.fp8_state().dump() : "");
  nlohmann::json merged = nlohmann::json::object();
  if (checkpoint::world_rank() != 0) return merged;
  for (const std::string& s : all)
    if (!s.empty()) merged.update(nlohmann::json::parse(s));
  return merged;
}

void TrainCheckpoints::to_host(parallel::ParamList& params, checkpoint::OptimState& optim, checkpoint::RngState& rng,
                               bool copy) {
  size_t k = 0;
  bool cuda = false;
  const auto host = [&](torch::Tensor& t) {
    cuda = cuda || t.is_cuda();
    if (k == host_.size() || !host_[k].sizes().equals(t.sizes()) || host_[k].scalar_type() != t.scalar_type())
      (k == host_.size() ? host_.emplace_back() : host_[k]) =
          torch::empty(t.sizes(), torch::TensorOptions().dtype(t.scalar_type()).pinned_memory(t.is_cuda()));
    torch::Tensor& h = host_[k++];
    if (copy) h.copy_(t.detach(), /*non_blocking=*/t.is_cuda());
    t = h;
  };
  for (auto& pi : params) host(pi.param);
  for (auto& [state, tensors] : optim)
    for (auto& [name, t] : tensors) host(t);
  for (auto& [name, t] : rng) host(t);
  if (cuda && copy) torch::cuda::synchronize();
}

void TrainCheckpoints::reserve_host_memory() {
  if (!background_) return;
  Timer took;
  took.start();
  parallel::ParamList params = p_.model.params();
  checkpoint::OptimState optim = to_checkpoint_optim(p_.optimizer.state_dict());  // collective (ZeRO)
  checkpoint::RngState rng = rng_to_checkpoint(p_.model.rng());
  to_host(params, optim, rng, /*copy=*/false);
  double bytes = 0;
  for (const auto& t : host_) bytes += static_cast<double>(t.numel() * t.element_size());
  p_.log.info0("--async-save: ", gigabytes(bytes), " of host memory for the state's copy reserved in ",
               fixed(took.elapsed(), 2), " s");
}

void TrainCheckpoints::poll() {
  if (!background_) return;
  if (const auto dir = background_->poll()) finished(*dir);
}

void TrainCheckpoints::finish() {
  if (!background_ || !background_->in_flight()) return;
  finished(background_->wait());
}

void TrainCheckpoints::finished(const std::string& dir) {
  last_saved_ = background_->iteration();
  p_.log.info0("saved checkpoint at iteration ", last_saved_, " to ", dir, " (written in the background in ",
               fixed(steady_seconds() - background_started_, 2), " s)");
}

}  // namespace megaton::train
