#include "parallel/tensor/cross_entropy.h"

#include <torch/csrc/autograd/custom_function.h>

#include <limits>

#include "core/error.h"
#include "parallel/tensor/comm_capsule.h"

namespace megaton::parallel {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The unfused forward's pieces: per-token loss [..] and softmax [.., v] in the compute dtype (fp32, fp64 for fp64
// logits); local_target [..] the target's column on this rank (0 where `outside`: another rank owns it).
struct SoftmaxLoss {
  torch::Tensor loss, softmax, outside, local_target;
};

SoftmaxLoss softmax_loss(const torch::Tensor& logits, const torch::Tensor& target, dist::Communicator& c,
                         int64_t valid_columns) {
  const int64_t part = logits.size(-1);
  const int64_t start = part * c.rank(), end = start + part;
  // Subtract the global max for stability.
  const auto compute = logits.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  torch::Tensor x = logits.to(compute);              // [s, b, v]
  if (valid_columns >= 0 && valid_columns < part) {  // padding columns count as -inf
    torch::Tensor padding = torch::arange(part, torch::TensorOptions().device(x.device())) >= valid_columns;  // [v]
    x = x.masked_fill(padding, -std::numeric_limits<double>::infinity());
  }
  torch::Tensor max = std::get<0>(x.max(-1)).contiguous();  // [s, b]
  c.all_reduce(max, dist::ReduceOp::kMax);
  x = x - max.unsqueeze(-1);
  // The target's logit, found on the rank that owns it, zero elsewhere, summed.
  torch::Tensor outside = (target < start).logical_or(target >= end);     // [s, b]
  torch::Tensor local_target = (target - start).masked_fill(outside, 0);  // [s, b]
  torch::Tensor predicted = x.gather(-1, local_target.unsqueeze(-1)).squeeze(-1).masked_fill(outside, 0.0);
  predicted = predicted.contiguous();
  c.all_reduce(predicted, dist::ReduceOp::kSum);     // [s, b]
  torch::Tensor exp = x.exp();                       // [s, b, v]
  torch::Tensor sum_exp = exp.sum(-1).contiguous();  // [s, b]
  c.all_reduce(sum_exp, dist::ReduceOp::kSum);
  torch::Tensor loss = sum_exp.log() - predicted;           // [s, b]
  torch::Tensor softmax = exp.div_(sum_exp.unsqueeze(-1));  // [s, b, v]
  return {loss, softmax, outside, local_target};
}

// softmax - one_hot(target) (the target's column only on the rank that owns it), in place in `softmax`.
torch::Tensor subtract_one_hot_(torch::Tensor softmax, const torch::Tensor& outside,
                                const torch::Tensor& local_target) {
  torch::Tensor inside = outside.logical_not().to(softmax.scalar_type());  // [s, b]
  return softmax.scatter_add_(-1, local_target.unsqueeze(-1), -inside.unsqueeze(-1));
}

struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor logits, torch::Tensor target,
                               const dist::CommunicatorPtr& comm, int64_t valid_columns) {
    SoftmaxLoss r = softmax_loss(logits, target, *comm, valid_columns);
    ctx->save_for_backward({r.softmax, r.outside, r.local_target});
    ctx->saved_data["in_dtype"] = static_cast<int64_t>(logits.scalar_type());
    return r.loss;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    torch::Tensor grad = subtract_one_hot_(saved[0].clone(), saved[1], saved[2]);  // [s, b, v]
    grad.mul_(grads[0].unsqueeze(-1));
    const auto in_dtype = static_cast<c10::ScalarType>(ctx->saved_data["in_dtype"].toInt());
    return {grad.to(in_dtype), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& logits, const torch::Tensor& target,
                                           const dist::CommunicatorPtr& tp, int64_t valid_columns, bool use_fused) {
  MEGATON_ASSERT(logits.dim() == target.dim() + 1 && logits.sizes().slice(0, target.dim()) == target.sizes(),
                 "cross-entropy: logits ", logits.sizes(), " do not match targets ", target.sizes());
#ifdef MEGATON_HAVE_CUDA
  if (use_fused && logits.is_cuda() && logits.scalar_type() != torch::kFloat64)
    return fused_vocab_parallel_cross_entropy(logits, target.to(torch::kInt64), tp, valid_columns);
#endif
  return VocabParallelCrossEntropy::apply(logits, target.to(torch::kInt64), tp, valid_columns);
}

torch::Tensor cross_entropy_loss_grad_(torch::Tensor& logits, const torch::Tensor& target,
                                       const dist::CommunicatorPtr& tp, int64_t valid_columns, bool use_fused) {
  MEGATON_ASSERT(logits.dim() == 2 && target.dim() == 1 && logits.size(0) == target.size(0) && logits.is_contiguous(),
                 "cross_entropy_loss_grad_: logits ", logits.sizes(), " (contiguous [rows, v]) and targets ",
                 target.sizes(), " ([rows])");
  const torch::Tensor t = target.to(torch::kInt64);
#ifdef MEGATON_HAVE_CUDA
  if (use_fused && logits.is_cuda() && logits.scalar_type() != torch::kFloat64)
    return fused_cross_entropy_loss_grad_(logits, t, tp, valid_columns);
#else
  (void)use_fused;
#endif
  SoftmaxLoss r = softmax_loss(logits, t, *tp, valid_columns);
  logits.copy_(subtract_one_hot_(r.softmax, r.outside, r.local_target));
  return r.loss;
}

}  // namespace megaton::parallel
