// The mixed-precision optimizer (Megatron's Float16OptimizerWithFloat16Params / FP32Optimizer, and with ZeRO-1 its
// distributed optimizer), over the flat buffers of parallel::DataParallel.
//
// fp32 master weights [S] (S = this rank's shard: everything without ZeRO-1, 1/DP of it with) live in one flat buffer;
// for fp32 models without ZeRO-1 the masters *are* the parameter buffer. Adam moments / SGD momentum are flat [S]
// buffers too, so a step is a few large kernels whatever the number of parameters.
//
// step():
//   1. finish the data-parallel gradient reduction (idempotent when the training loop already did it);
//   2. with a grad scaler (fp16, or --loss-scale): main grads *= 1/scale; found_inf = any non-finite, MAX-reduced over
//      the model-parallel group (and DP under ZeRO-1) so every rank agrees; scaler.update(found_inf); if found_inf the
//      step is skipped: returns {updated = false} and the parameters are untouched;
//   2b. without a scaler (bf16, fp32): the same skip when the gradients are not finite (the global grad norm is read
//      on the host, or a non-finite flag reduced as above without --clip-grad); counted in skipped_steps();
//   3. --clip-grad > 0: global L2 norm over TP, PP (and DP under ZeRO-1), each TP-replicated parameter counted on TP
//      rank 0 only and the tied embedding on the first stage only; grads *= clip / (norm + 1e-6) when that is < 1
//      (the fused Adam applies that factor as it reads the grads instead, unless zeros are counted);
//   4. optional zero count (same parameters as the norm);
//   5. Adam (apex FusedAdam, adam_w_mode: decoupled weight decay p -= lr*wd*p, bias-corrected moments) or SGD with
//      momentum (torch/apex SGD: L2 weight decay added to the gradient, momentum buffer = first gradient on step 1);
//      parameters with ParamInfo::no_weight_decay get weight decay 0;
//   6. masters are copied (ZeRO-1: all-gathered over DP) into the model-dtype parameters; under ZeRO-1 with
//      --overlap-param-gather the all-gathers are only started (DataParallel::start_param_gather): the next forward
//      waits for each bucket, and state_dict / load_state_dict / reload_model_params wait for them all.
// CUDA masters (a CUDA build, adam, use_fused_adam): 3 (the clip's scaling) and 5 are one kernel
// (kernels/adam_kernels.cu, 28 bytes per parameter instead of ~104), which also does 6 when the shard is the whole
// buffer (it writes the rounded masters into the parameters). CPU masters always take the ATen path.
// muP (ParamInfo::lr_scale != 1): those parameters' updates take lr * lr_scale, their weight decay lr * wd, as
// mup.MuAdam's groups (lr / w, wd * w) give in apex's AdamW; the ATen path runs it (no fused kernel).
// --use-bnb-optimizer: the moments are bitsandbytes' 8-bit blockwise states (adam8bit.h) and 5 is its update.
// Note: step() uses the main-grad shard as scratch space; gradients are only valid until the step.
#pragma once
#include <torch/torch.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/device_scalar.h"
#include "dist/process_groups.h"
#include "optim/adam8bit.h"
#include "optim/adam_step.h"
#include "optim/flat_runs.h"
#include "optim/grad_scaler.h"
#include "optim/optimizer_options.h"
#include "parallel/data/data_parallel.h"

namespace megaton::optim {

/// What step() did: Megatron's (update_successful, grad_norm, num_zeros_in_grad).
struct StepResult {
  bool updated = false;
  DeviceScalar grad_norm;  // read lazily: the step itself never waits for the GPU (unless fp16's inf check does)
  DeviceScalar num_zeros;  // fp64 (exact below 2^53), read lazily as grad_norm; with log_num_zeros_in_grad only
};

/// Optimizer state of one parameter at its local (TP-shard) shape, fp32: "master", and "exp_avg" + "exp_avg_sq" (adam)
/// or "momentum_buffer" (sgd, once it exists).
using ParamState = std::map<std::string, torch::Tensor>;

class MixedPrecisionOptimizer {
 public:
  /// `dp` and `groups` must outlive the optimizer. `scaler` may be null (bf16/fp32 without --loss-scale).
  MixedPrecisionOptimizer(parallel::DataParallel& dp, const dist::ProcessGroups& groups, OptimizerOptions options,
                          std::unique_ptr<GradScaler> scaler);

  /// want_zero_count: with log_num_zeros_in_grad, whether this step counts them (the trainer asks at log points only:
  /// Megatron counts every step and shows the count at log lines; the count costs a pass over the gradients and
  /// keeps the clip out of the fused Adam).
  StepResult step(bool want_zero_count = true);
  /// Zeroes the grads for the next iteration.
  void zero_grad();

  void set_lr(double lr) { options_.lr = lr; }
  double lr() const { return options_.lr; }
  /// Multiply the loss by this before backward (1 without a scaler).
  double loss_scale() const { return scaler_ ? scaler_->scale() : 1.0; }
  GradScaler* grad_scaler() { return scaler_.get(); }
  const OptimizerOptions& options() const { return options_; }
  /// Successful steps so far (Adam's bias-correction step).
  int64_t step_count() const { return step_; }
  /// Steps skipped because of inf/NaN gradients.
  int64_t skipped_steps() const { return skipped_; }
  /// [S] fp32 masters of this rank's shard.
  const torch::Tensor& master_shard() const { return master_; }

  /// Per-parameter state keyed by ParamInfo::name, each tensor at the parameter's local shape. Collective over DP
  /// under ZeRO-1 (the shards are all-gathered); every rank gets the whole local-TP state.
  std::map<std::string, ParamState> state_dict() const;
  /// Loads what state_dict() returned (or a checkpoint's equivalent): every parameter's state must be present with
  /// its local shape (CheckpointError otherwise). Not collective: each rank takes its shard. Also writes the masters
  /// into the model parameters.
  void load_state_dict(const std::map<std::string, ParamState>& state);
  /// Scalars: {"optimizer": "adam"|"sgd", "step": n, "skipped_steps": k, "momentum_initialized": b,
  /// "grad_scaler": {...} (only with a scaler)}.
  nlohmann::json scalar_state() const;
  void load_scalar_state(const nlohmann::json& state);
  /// Re-reads the masters from the model parameters (after a checkpoint loaded weights only, e.g. --no-load-optim).
  void reload_model_params();
  /// Bytes of the moments / momentum held on this rank.
  int64_t moment_bytes() const;
  /// The state names of this optimizer kind.
  std::vector<std::string> state_names() const;
  /// Megatron's params norm (--log-params-norm): the global L2 norm of the fp32 masters, each parameter counted once
  /// (TP-replicated ones on TP rank 0, the tied embedding on the first stage, ZeRO shards summed), on the device.
  DeviceScalar params_norm();

 private:
  /// Sum of squares over norm_runs_ of a shard-shaped flat tensor, over the model-parallel ranks and the shards:
  /// fp64 [1] on the device.
  torch::Tensor global_squared_norm(const torch::Tensor& flat);
  bool unscale_and_check_for_inf();
  /// Whether any rank's gradient shard holds NaN or inf (MAX-reduced over the model-parallel group and the shards).
  bool any_nonfinite_grad();
  /// Returns the global grad norm, on the device. Clips the grads in place, or, with `defer`, leaves them and returns
  /// the clip coefficient (fp32 [1] on the device; 1 when there is nothing to clip) in `grad_scale` for the fused Adam.
  DeviceScalar grad_norm_and_clip(bool defer, torch::Tensor& grad_scale);
  DeviceScalar count_zeros();
  /// The next Adam step's scalars (counts the step). grad_scale: undefined, or fp32 [1] on the device multiplying the
  /// grads first (a deferred clip coefficient).
  AdamScalars next_adam_scalars(const torch::Tensor& grad_scale);
  /// Adam with `s` on the whole shard, and the parameters' copy when the fused kernel does not write them.
  void apply_adam(const AdamScalars& s);
  void sgd_update();
  /// Step 6: the updated masters into the model parameters (started only, with the overlapped all-gather).
  void publish_params();
  void all_reduce_over_model_and_shard(torch::Tensor& t, dist::ReduceOp op);

  parallel::DataParallel& dp_;
  const dist::ProcessGroups& groups_;
  OptimizerOptions options_;
  std::unique_ptr<GradScaler> scaler_;
  torch::Tensor master_;                         // [S] fp32 (may alias dp_.param_buffer())
  torch::Tensor exp_avg_;                        // [S] adam
  torch::Tensor exp_avg_sq_;                     // [S] adam
  torch::Tensor momentum_;                       // [S] sgd
  std::unique_ptr<BlockwiseAdam8bit> adam8bit_;  // --use-bnb-optimizer: holds the moments instead of exp_avg_*
  bool momentum_initialized_ = false;
  std::vector<Run> decay_runs_;        // parameters with weight decay
  std::vector<Run> norm_runs_;         // parameters counted in the grad norm / zero count on this rank
  std::vector<ScaledRuns> lr_scales_;  // muP: parameters whose update takes lr * scale (the ATen path then)
  bool fused_adam_ = false;            // adam_update runs kernels/adam_kernels.cu (CUDA masters, use_fused_adam)
  torch::Tensor adam_chunks_;  // [C, 3] int64 on the masters' device: the fused kernel's {start, len, decay} rows
  torch::Tensor param_out_;    // [N] model dtype: the parameters the fused kernel writes (undefined: step copies)
  int64_t step_ = 0;
  int64_t skipped_ = 0;
};

}  // namespace megaton::optim
