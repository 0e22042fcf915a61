#include "optim/adam_step.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace megaton::optim {

void adam_step_aten(const torch::Tensor& master, const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq,
                    const torch::Tensor& grad, const std::vector<Run>& decay_runs, const AdamScalars& s,
                    const std::vector<ScaledRuns>& lr_scales) {
  const torch::Tensor& g = grad;  // [S], used as scratch for the denominator below
  const double b1 = s.hyper.beta1, b2 = s.hyper.beta2, lr = s.hyper.lr;
  if (s.device_grad_scale.defined())
    g.mul_(s.device_grad_scale);
  else if (s.hyper.grad_scale != 1.0)
    g.mul_(s.hyper.grad_scale);
  exp_avg.mul_(b1).add_(g, 1.0 - b1);
  exp_avg_sq.mul_(b2).addcmul_(g, g, 1.0 - b2);
  // Decoupled weight decay on the old weights: p <- p - lr * (m_hat / (sqrt(v_hat) + eps) + wd * p).
  if (s.hyper.weight_decay > 0 && !decay_runs.empty()) {
    const double keep = 1.0 - lr * s.hyper.weight_decay;
    if (covers_all(decay_runs, master.numel()))
      master.mul_(keep);
    else
      torch::_foreach_mul_(run_views(master, decay_runs), keep);
  }
  torch::Tensor denom = g;  // reuse the gradient buffer: denom = sqrt(v) / sqrt(bc2) + eps
  torch::sqrt_out(denom, exp_avg_sq);
  denom.div_(std::sqrt(s.hyper.bias_correction2)).add_(s.hyper.eps);
  for (const ScaledRuns& r : lr_scales)  // update * scale = m / (denom / scale)
    if (!r.runs.empty()) torch::_foreach_div_(run_views(denom, r.runs), r.scale);
  master.addcdiv_(exp_avg, denom, -lr / s.hyper.bias_correction1);
}

torch::Tensor adam_chunk_table(const std::vector<Run>& decay_runs, int64_t numel, int64_t chunk) {
  MEGATON_ASSERT(chunk > 0 && numel >= 0, "adam_chunk_table: chunk ", chunk, ", numel ", numel);
  std::vector<int64_t> rows;  // {start, len, decay} per chunk
  auto add = [&](int64_t begin, int64_t end, int64_t decay) {
    for (int64_t at = begin; at < end;) {
      const int64_t len = std::min(chunk, end - at);
      rows.insert(rows.end(), {at, len, decay});
      at += len;
    }
  };
  int64_t at = 0;
  for (const Run& r : decay_runs) {
    MEGATON_ASSERT(r.offset >= at && r.numel >= 0 && r.offset + r.numel <= numel, "adam_chunk_table: decay run [",
                   r.offset, ", ", r.offset + r.numel, ") is not sorted, disjoint and inside [0, ", numel, ")");
    add(at, r.offset, 0);
    add(r.offset, r.offset + r.numel, 1);
    at = r.offset + r.numel;
  }
  add(at, numel, 0);
  const auto n = static_cast<int64_t>(rows.size());
  return torch::from_blob(rows.data(), {n / 3, 3}, torch::kInt64).clone();  // [C, 3]
}

#ifndef MEGATON_HAVE_CUDA
void adam_step_fused(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                     const torch::Tensor&, const AdamScalars&, const torch::Tensor&, int) {
  throw InternalError("adam_step_fused: this build has no CUDA kernels (configure with -DMEGATON_CUDA=ON)");
}
#endif

}  // namespace megaton::optim
