// The CUDA path of vocab_parallel_cross_entropy: kernels/cross_entropy_kernels.cu's fused row statistics and backward,
// the per-row results combined over TP with three small all-reduces ([rows] floats instead of Megatron's three
// all-reduces of the same size, but without the [rows, V/tp] fp32 intermediates).
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/autograd/custom_function.h>

#include "core/error.h"
#include "core/kernel_float_type.h"
#include "cross_entropy_kernels.h"  // kernels/
#include "parallel/tensor/cross_entropy.h"

namespace megaton::parallel {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

kernels::FloatType float_type(const torch::Tensor& t) {
  return kernel_float_type(t, "fused cross-entropy");
}

// This rank's columns below vocab_size: valid_columns clamped to cols (-1: every column).
int64_t valid_of(int64_t valid_columns, int64_t cols) {
  return valid_columns < 0 ? cols : std::min(valid_columns, cols);
}

// Per-row statistics of logits [rows, cols] (contiguous) combined over TP: the global max M, the sum S of exp(x - M)
// and the target's logit T (kernels/cross_entropy_kernels.h), each [rows] fp32; loss = log(S) + M - T.
struct RowStats {
  torch::Tensor global_max, row_sum, target_logit;
  int64_t start = 0, valid = 0;  // this rank's first global column; its columns below vocab_size
};

RowStats combined_row_stats(const torch::Tensor& x, const torch::Tensor& t, dist::Communicator& c,
                            int64_t valid_columns, cudaStream_t stream) {
  const int64_t cols = x.size(-1), rows = x.numel() / std::max<int64_t>(cols, 1);
  RowStats r;
  r.start = cols * c.rank();
  r.valid = valid_of(valid_columns, cols);
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(x.device());
  torch::Tensor row_max = torch::empty({rows}, f32);
  r.row_sum = torch::empty({rows}, f32);
  r.target_logit = torch::empty({rows}, f32);
  kernels::cross_entropy_row_stats(x.data_ptr(), float_type(x), rows, cols, r.valid, t.data_ptr<int64_t>(), r.start,
                                   row_max.data_ptr<float>(), r.row_sum.data_ptr<float>(),
                                   r.target_logit.data_ptr<float>(), stream);
  r.global_max = row_max;
  if (c.size() > 1) {
    r.global_max = row_max.clone();
    c.all_reduce(r.global_max, dist::ReduceOp::kMax);
    r.row_sum.mul_((row_max - r.global_max).exp_());
    c.all_reduce(r.row_sum, dist::ReduceOp::kSum);
    c.all_reduce(r.target_logit, dist::ReduceOp::kSum);
  }
  return r;
}

struct FusedVocabParallelCrossEntropy : torch::autograd::Function<FusedVocabParallelCrossEntropy> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor logits, torch::Tensor target,
                               const dist::CommunicatorPtr& comm, int64_t valid_columns) {
    torch::Tensor x = logits.contiguous();                    // [rows, cols] in memory
    torch::Tensor t = target.contiguous().to(torch::kInt64);  // [rows]
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(logits.device().index()).stream();
    const RowStats r = combined_row_stats(x, t, *comm, valid_columns, stream);
    torch::Tensor loss = r.row_sum.log() + r.global_max - r.target_logit;  // [rows] fp32
    ctx->save_for_backward({x, t, r.global_max, r.row_sum.reciprocal()});
    ctx->saved_data["start"] = r.start;
    ctx->saved_data["valid"] = r.valid;
    return loss.view(target.sizes());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const int64_t cols = x.size(-1), rows = x.numel() / std::max<int64_t>(cols, 1);
    torch::Tensor g = grads[0].contiguous().to(torch::kFloat32);  // [rows]
    torch::Tensor grad = torch::empty_like(x);
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(x.device().index()).stream();
    kernels::cross_entropy_backward(x.data_ptr(), grad.data_ptr(), float_type(x), rows, cols,
                                    ctx->saved_data["valid"].toInt(), saved[1].data_ptr<int64_t>(),
                                    ctx->saved_data["start"].toInt(), saved[2].data_ptr<float>(),
                                    saved[3].data_ptr<float>(), g.data_ptr<float>(), stream);
    return {grad, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor fused_cross_entropy_loss_grad_(torch::Tensor& logits, const torch::Tensor& target,
                                             const dist::CommunicatorPtr& tp, int64_t valid_columns) {
  MEGATON_ASSERT(logits.is_cuda() && logits.is_contiguous(), "fused cross-entropy needs contiguous CUDA logits");
  dist::Communicator& c = *tp;
  const int64_t cols = logits.size(-1), rows = logits.size(0);
  const torch::Tensor t = target.contiguous();  // [rows] int64
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(logits.device().index()).stream();
  if (c.size() == 1) {  // one pass over the logits where a row fits in shared memory
    torch::Tensor loss = torch::empty({rows}, logits.options().dtype(torch::kFloat32));
    if (kernels::cross_entropy_loss_grad(logits.data_ptr(), float_type(logits), rows, cols,
                                         valid_of(valid_columns, cols), t.data_ptr<int64_t>(), loss.data_ptr<float>(),
                                         stream))
      return loss;
  }
  const RowStats r = combined_row_stats(logits, t, c, valid_columns, stream);
  torch::Tensor inv_sum = r.row_sum.reciprocal();
  kernels::cross_entropy_backward(logits.data_ptr(), logits.data_ptr(), float_type(logits), rows, cols, r.valid,
                                  t.data_ptr<int64_t>(), r.start, r.global_max.data_ptr<float>(),
                                  inv_sum.data_ptr<float>(), nullptr, stream);
  return r.row_sum.log() + r.global_max - r.target_logit;  // [rows] fp32
}

bool scale_rows_cuda(const torch::Tensor& x, const torch::Tensor& scale, torch::Tensor& out) {
  const auto type = try_kernel_float_type(x);
  if (!type || !x.is_cuda() || !x.is_contiguous() || x.dim() < 1 || !out.is_contiguous() || out.sizes() != x.sizes() ||
      out.scalar_type() != x.scalar_type() || out.device() != x.device() || scale.scalar_type() != torch::kFloat32 ||
      scale.device() != x.device() || !scale.is_contiguous())
    return false;
  const int64_t cols = x.size(-1), rows = x.numel() / std::max<int64_t>(cols, 1);
  if (scale.numel() != rows) return false;
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(x.device().index()).stream();
  kernels::scale_rows(x.data_ptr(), out.data_ptr(), *type, rows, cols, scale.data_ptr<float>(), stream);
  return true;
}

torch::Tensor fused_vocab_parallel_cross_entropy(const torch::Tensor& logits, const torch::Tensor& target,
                                                 const dist::CommunicatorPtr& tp, int64_t valid_columns) {
  MEGATON_ASSERT(logits.is_cuda(), "fused cross-entropy needs CUDA logits");
  return FusedVocabParallelCrossEntropy::apply(logits, target, tp, valid_columns);
}

}  // namespace megaton::parallel
