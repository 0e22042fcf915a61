#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"
#include "optim/adam_step.h"

namespace megaton::optim {

MixedPrecisionOptimizer::MixedPrecisionOptimizer(parallel::DataParallel& dp, const dist::ProcessGroups& groups,
                                                 OptimizerOptions options, std::unique_ptr<GradScaler> scaler)
    : dp_(dp), groups_(groups), options_(std::move(options)), scaler_(std::move(scaler)) {
  options_.validate();
  torch::NoGradGuard no_grad;
  const torch::Tensor& pbuf = dp_.param_buffer();
  if (pbuf.scalar_type() == torch::kFloat32 && dp_.shard_is_whole()) {
    master_ = pbuf;  // FP32Optimizer: the parameters are their own masters
  } else {
    master_ = dp_.shard_of(pbuf).to(torch::kFloat32);
  }
  const auto opts = master_.options();
  if (options_.use_bnb) {
    adam8bit_ = std::make_unique<BlockwiseAdam8bit>(dp_.shard_pieces(), dp_.params(), master_.numel(), opts);
  } else if (options_.kind == "adam") {
    exp_avg_ = torch::zeros({master_.numel()}, opts);
    exp_avg_sq_ = torch::zeros({master_.numel()}, opts);
  } else if (options_.sgd_momentum != 0.0) {
    momentum_ = torch::zeros({master_.numel()}, opts);
  }
  const auto& params = dp_.params();
  decay_runs_ = merge_runs(dp_.shard_pieces(), params, [](const parallel::ParamInfo& p) { return !p.no_weight_decay; });
  const bool tp_rank0 = !groups_.tp || groups_.tp->rank() == 0;
  const bool first_stage = groups_.is_first_stage();
  norm_runs_ = merge_runs(dp_.shard_pieces(), params, [&](const parallel::ParamInfo& p) {
    const bool not_tp_duplicate = !p.tp_replicated() || tp_rank0;
    const bool not_shared = !p.tied_embedding || first_stage;
    return not_tp_duplicate && not_shared;
  });
  // muP's per-parameter learning rates (ParamInfo::lr_scale), grouped by scale.
  std::set<double> scales;
  for (const auto& p : params)
    if (p.lr_scale != 1.0) scales.insert(p.lr_scale);
  for (const double scale : scales)
    lr_scales_.push_back(
        {merge_runs(dp_.shard_pieces(), params, [scale](const parallel::ParamInfo& p) { return p.lr_scale == scale; }),
         scale});
  MEGATON_CHECK(scales.empty() || options_.kind == "adam", UsageError,
                "--mup goes with --optimizer adam (its learning-rate scaling is mup.MuAdam's)");
  MEGATON_CHECK(scales.empty() || !options_.use_bnb, UsageError,
                "--mup with --use-bnb-optimizer is not supported: the 8-bit Adam has no per-parameter learning rates");
#ifdef MEGATON_HAVE_CUDA
  fused_adam_ = options_.kind == "adam" && !options_.use_bnb && lr_scales_.empty() && options_.use_fused_adam &&
                master_.is_cuda();
#endif
  if (fused_adam_) {
    adam_chunks_ = adam_chunk_table(decay_runs_, master_.numel()).to(master_.device());
    const auto t = pbuf.scalar_type();
    const bool rounds = t == torch::kFloat32 || t == torch::kBFloat16 || t == torch::kFloat16;
    if (dp_.shard_is_whole() && !master_.is_same(pbuf) && rounds) param_out_ = pbuf;
  }
}

void MixedPrecisionOptimizer::all_reduce_over_model_and_shard(torch::Tensor& t, dist::ReduceOp op) {
  if (groups_.mp && groups_.mp->size() > 1) groups_.mp->all_reduce(t, op);
  if (!dp_.shard_is_whole()) groups_.dp->all_reduce(t, op);
}

bool MixedPrecisionOptimizer::unscale_and_check_for_inf() {
  dp_.shard_grad().mul_(scaler_->inv_scale());
  return any_nonfinite_grad();
}

bool MixedPrecisionOptimizer::any_nonfinite_grad() {
  const torch::Tensor& g = dp_.shard_grad();  // [S]
  const bool local_inf = !torch::isfinite(g).all().item<bool>();
  torch::Tensor flag = torch::full({1}, local_inf ? 1.0f : 0.0f, g.options());
  all_reduce_over_model_and_shard(flag, dist::ReduceOp::kMax);
  return flag.item<float>() > 0.0f;
}

torch::Tensor MixedPrecisionOptimizer::global_squared_norm(const torch::Tensor& flat) {
  torch::Tensor sq;
  if (norm_runs_.empty()) {
    sq = torch::zeros({1}, flat.options().dtype(torch::kFloat64));
  } else if (covers_all(norm_runs_, flat.numel())) {
    sq = flat.norm().to(torch::kFloat64).pow(2).reshape({1});
  } else {
    auto norms = torch::_foreach_norm(run_views(flat, norm_runs_));  // one per run
    sq = torch::stack(norms).to(torch::kFloat64).pow(2).sum().reshape({1});
  }
  all_reduce_over_model_and_shard(sq, dist::ReduceOp::kSum);
  return sq;
}

DeviceScalar MixedPrecisionOptimizer::params_norm() {
  torch::NoGradGuard no_grad;
  return DeviceScalar(global_squared_norm(master_).sqrt());
}

DeviceScalar MixedPrecisionOptimizer::grad_norm_and_clip(bool defer, torch::Tensor& grad_scale) {
  const torch::Tensor& g = dp_.shard_grad();  // [S]
  const torch::Tensor sq = global_squared_norm(g);
  // Norm and clip coefficient stay on the device (fp64 as before): reading the norm here made every step wait for
  // the GPU. coeff = min(1, clip / (norm + 1e-6)); multiplying by exactly 1 leaves the grads bit-identical.
  const torch::Tensor norm = sq.sqrt();  // [1] fp64
  const torch::Tensor coeff =
      torch::div(torch::full_like(norm, options_.clip_grad), norm + 1.0e-6).clamp_max(1.0).to(torch::kFloat32);
  if (defer)
    grad_scale = coeff;
  else
    g.mul_(coeff);
  return DeviceScalar(norm);
}

DeviceScalar MixedPrecisionOptimizer::count_zeros() {
  // Counted on the device and read with the log line (a host read per run of parameters here made the step wait for
  // the GPU). Megatron counts with torch.count_nonzero too.
  const torch::Tensor& g = dp_.shard_grad();
  torch::Tensor zeros = torch::zeros({1}, g.options().dtype(torch::kFloat64));  // [1]
  for (const auto& v : run_views(g, norm_runs_))
    zeros += static_cast<double>(v.numel()) - torch::count_nonzero(v).to(torch::kFloat64);
  all_reduce_over_model_and_shard(zeros, dist::ReduceOp::kSum);
  return DeviceScalar(zeros);
}

AdamScalars MixedPrecisionOptimizer::next_adam_scalars(const torch::Tensor& grad_scale) {
  step_ += 1;
  AdamScalars s;
  kernels::AdamHyper& h = s.hyper;
  h.lr = options_.lr;
  h.beta1 = options_.adam_beta1;
  h.beta2 = options_.adam_beta2;
  h.eps = options_.adam_eps;
  h.weight_decay = options_.weight_decay;
  h.bias_correction1 = 1.0 - std::pow(h.beta1, static_cast<double>(step_));
  h.bias_correction2 = 1.0 - std::pow(h.beta2, static_cast<double>(step_));
  s.device_grad_scale = grad_scale;
  return s;
}

void MixedPrecisionOptimizer::apply_adam(const AdamScalars& s) {
  if (fused_adam_) {  // one pass; also writes the parameters when param_out_ is defined
    if (adam_chunks_.size(0) > 0)
      adam_step_fused(master_, exp_avg_, exp_avg_sq_, dp_.shard_grad(), adam_chunks_, s, param_out_);
    if (!param_out_.defined()) publish_params();
    return;
  }
  if (adam8bit_) {
    adam8bit_->step(master_, dp_.shard_grad(), s);
    publish_params();
    return;
  }
  MEGATON_ASSERT(!s.device_grad_scale.defined(), "the ATen Adam path takes gradients already clipped");
  adam_step_aten(master_, exp_avg_, exp_avg_sq_, dp_.shard_grad(), decay_runs_, s, lr_scales_);
  if (!param_out_.defined()) publish_params();
}

void MixedPrecisionOptimizer::publish_params() {
  if (dp_.overlaps_param_gather())
    dp_.start_param_gather(master_);  // the next forward waits for each bucket as it reaches it
  else
    dp_.all_gather_params(master_);
}

void MixedPrecisionOptimizer::zero_grad() {
  dp_.zero_grad();
}

void MixedPrecisionOptimizer::sgd_update() {
  const torch::Tensor& g = dp_.shard_grad();  // [S]
  step_ += 1;
  if (options_.weight_decay > 0 && !decay_runs_.empty()) {  // L2: d_p = g + wd * p
    if (covers_all(decay_runs_, master_.numel()))
      g.add_(master_, options_.weight_decay);
    else
      torch::_foreach_add_(run_views(g, decay_runs_), run_views(master_, decay_runs_), options_.weight_decay);
  }
  if (options_.sgd_momentum != 0.0) {
    if (!momentum_initialized_) {
      momentum_.copy_(g);
      momentum_initialized_ = true;
    } else {
      momentum_.mul_(options_.sgd_momentum).add_(g);
    }
    master_.add_(momentum_, -options_.lr);
  } else {
    master_.add_(g, -options_.lr);
  }
}

StepResult MixedPrecisionOptimizer::step(bool want_zero_count) {
  torch::NoGradGuard no_grad;
  dp_.finish_grad_sync();
  StepResult r;
  if (scaler_) {
    const bool found_inf = unscale_and_check_for_inf();
    scaler_->update(found_inf);
    if (found_inf) {
      skipped_ += 1;
      return r;
    }
  }
  // The fused Adam applies the clip coefficient as it reads the grads, saving a pass; the zero count reads the clipped
  // grads (a tiny grad can underflow to 0), so with it the clip stays a pass of its own.
  torch::Tensor grad_scale;  // fp32 [1] on the device when the fused Adam applies the clip
  const bool counting = options_.log_num_zeros_in_grad && want_zero_count;
  const bool defer_clip = fused_adam_ && !counting;
  if (options_.clip_grad > 0) r.grad_norm = grad_norm_and_clip(defer_clip, grad_scale);
  if (!scaler_ && options_.skip_nonfinite) {
    // The norm is global (every rank reads the same value); without it a flag is reduced the same way.
    const bool nonfinite = r.grad_norm ? !std::isfinite(*r.grad_norm) : any_nonfinite_grad();
    if (nonfinite) {
      skipped_ += 1;
      return r;
    }
  }
  if (counting) r.num_zeros = count_zeros();
  r.updated = true;
  if (options_.kind == "adam") {
    apply_adam(next_adam_scalars(grad_scale));
    return r;
  }
  sgd_update();
  publish_params();
  return r;
}

int64_t MixedPrecisionOptimizer::moment_bytes() const {
  if (adam8bit_) return adam8bit_->state_bytes();
  int64_t n = 0;
  for (const auto* t : {&exp_avg_, &exp_avg_sq_, &momentum_})
    if (t->defined()) n += t->numel() * 4;
  return n;
}

std::vector<std::string> MixedPrecisionOptimizer::state_names() const {
  if (options_.kind == "adam") return {"master", "exp_avg", "exp_avg_sq"};
  if (momentum_.defined()) return {"master", "momentum_buffer"};
  return {"master"};
}

std::map<std::string, ParamState> MixedPrecisionOptimizer::state_dict() const {
  torch::NoGradGuard no_grad;
  dp_.finish_param_gather();  // the caller reads the model's parameters beside this state
  const auto& params = dp_.params();
  const auto& slots = dp_.layout().slots();
  std::map<std::string, ParamState> out;
  auto add = [&](const std::string& key, const torch::Tensor& shard) {
    torch::Tensor full = torch::empty({dp_.layout().numel()}, shard.options());  // [N]
    dp_.all_gather_into(full, shard);
    for (size_t i = 0; i < params.size(); ++i)
      out[params[i].name][key] = full.narrow(0, slots[i].offset, slots[i].numel).view(params[i].param.sizes()).clone();
  };
  add("master", master_);
  if (adam8bit_) {
    add("exp_avg", adam8bit_->exp_avg());
    add("exp_avg_sq", adam8bit_->exp_avg_sq());
  } else if (options_.kind == "adam") {
    add("exp_avg", exp_avg_);
    add("exp_avg_sq", exp_avg_sq_);
  } else if (momentum_.defined()) {
    add("momentum_buffer", momentum_);
  }
  return out;
}

void MixedPrecisionOptimizer::load_state_dict(const std::map<std::string, ParamState>& state) {
  torch::NoGradGuard no_grad;
  dp_.finish_param_gather();  // no all-gather in flight may land over the loaded weights
  const auto& params = dp_.params();
  const auto& slots = dp_.layout().slots();
  auto load = [&](const std::string& key, torch::Tensor& shard) {
    torch::Tensor full = torch::zeros({dp_.layout().numel()}, master_.options());  // [N] fp32
    for (size_t i = 0; i < params.size(); ++i) {
      const auto it = state.find(params[i].name);
      MEGATON_CHECK(it != state.end(), CheckpointError, "optimizer state: no entry for parameter '", params[i].name,
                    "'");
      const auto jt = it->second.find(key);
      MEGATON_CHECK(jt != it->second.end(), CheckpointError, "optimizer state: parameter '", params[i].name,
                    "' has no '", key, "'");
      MEGATON_CHECK(jt->second.sizes() == params[i].param.sizes(), CheckpointError, "optimizer state: '",
                    params[i].name, "/", key, "' has shape ", jt->second.sizes(), ", the parameter has ",
                    params[i].param.sizes());
      full.narrow(0, slots[i].offset, slots[i].numel).copy_(jt->second.reshape({-1}));
    }
    if (key == "master") {
      dp_.param_buffer().copy_(full);  // the model sees the loaded weights (rounded to its dtype)
      if (master_.is_same(dp_.param_buffer())) return;
    }
    shard.copy_(dp_.shard_of(full));
  };
  load("master", master_);
  if (adam8bit_) {
    torch::Tensor m = torch::empty_like(master_), v = torch::empty_like(master_);  // [S] fp32
    load("exp_avg", m);
    load("exp_avg_sq", v);
    adam8bit_->load(m, v);
  } else if (options_.kind == "adam") {
    load("exp_avg", exp_avg_);
    load("exp_avg_sq", exp_avg_sq_);
  } else if (momentum_.defined()) {
    const bool has = !state.empty() && state.begin()->second.count("momentum_buffer") > 0;
    if (has) {
      load("momentum_buffer", momentum_);
      momentum_initialized_ = true;
    }
  }
}

nlohmann::json MixedPrecisionOptimizer::scalar_state() const {
  nlohmann::json j = {{"optimizer", options_.kind},
                      {"step", step_},
                      {"skipped_steps", skipped_},
                      {"momentum_initialized", momentum_initialized_}};
  if (scaler_) j["grad_scaler"] = scaler_->state_dict();
  return j;
}

void MixedPrecisionOptimizer::load_scalar_state(const nlohmann::json& j) {
  try {
    MEGATON_CHECK(j.is_object() && j.contains("optimizer") && j.contains("step"), CheckpointError,
                  "optimizer scalar state: expected an object with 'optimizer' and 'step', got ", j.dump());
    const auto kind = j.at("optimizer").get<std::string>();
    MEGATON_CHECK(kind == options_.kind, CheckpointError, "optimizer state is for --optimizer ", kind,
                  " but this run uses --optimizer ", options_.kind);
    step_ = j.at("step").get<int64_t>();
    skipped_ = j.value("skipped_steps", int64_t{0});
    momentum_initialized_ = j.value("momentum_initialized", false) && momentum_.defined();
    if (scaler_ && j.contains("grad_scaler")) scaler_->load_state_dict(j.at("grad_scaler"));
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(str("optimizer scalar state: a value has the wrong type (", e.what(), ") in ", j.dump()));
  }
}

void MixedPrecisionOptimizer::reload_model_params() {
  torch::NoGradGuard no_grad;
  dp_.finish_param_gather();
  if (master_.is_same(dp_.param_buffer())) return;
  master_.copy_(dp_.shard_of(dp_.param_buffer()));
}

}  // namespace megaton::optim
