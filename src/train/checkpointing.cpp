#include "train/checkpointing.h"

#include <cstdio>

#include "checkpoint/checkpoint.h"
#include "core/timer.h"
#include "train/training_state.h"

namespace megaton::train {

TrainCheckpoints::TrainCheckpoints(Parts parts, const TrainConfig& config, std::string job_id)
    : p_(parts), config_(config), options_(config.checkpoint), job_id_(std::move(job_id)) {}

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
  Timer took;  // host clock: the save is host work (device-to-host copies and file writes)
  took.start();
  checkpoint::CheckpointState st;
  st.iteration = progress.iteration;
  st.state = {{"consumed_train_samples", progress.consumed_train_samples},
              {"consumed_valid_samples", progress.consumed_valid_samples},
              {"consumed_train_tokens", progress.consumed_train_tokens},
              {"lr_scheduler", p_.lr.state_dict()},
              {"optimizer", p_.optimizer.scalar_state()}};
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
  const std::string dir =
      checkpoint::save_checkpoint(c.save, st, p_.model.params(), so.save_optim ? &optim_state : nullptr,
                                  so.save_rng ? &rng_state : nullptr, p_.groups, so, p_.log);
  last_saved_ = progress.iteration;
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.1f", took.elapsed() * 1e3);
  p_.log.info0("saved checkpoint at iteration ", progress.iteration, " to ", dir, " (", ms, " ms)");
}

}  // namespace megaton::train
