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

struct FusedVocabParallelCrossEntropy : torch::autograd::Function<FusedVocabParallelCrossEntropy> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor logits, torch::Tensor target,
                               const dist::CommunicatorPtr& comm, int64_t valid_columns) {
    dist::Communicator& c = *comm;
    const int64_t cols = logits.size(-1), rows = logits.numel() / std::max<int64_t>(cols, 1);
    const int64_t start = cols * c.rank();
    const int64_t valid = valid_columns < 0 ? cols : std::min(valid_columns, cols);
    torch::Tensor x = logits.contiguous();                    // [rows, cols] in memory
    torch::Tensor t = target.contiguous().to(torch::kInt64);  // [rows]
    auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(logits.device());
    torch::Tensor row_max = torch::empty({rows}, f32), row_sum = torch::empty({rows}, f32),
                  target_logit = torch::empty({rows}, f32);
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(logits.device().index()).stream();
    kernels::cross_entropy_row_stats(x.data_ptr(), float_type(x), rows, cols, valid, t.data_ptr<int64_t>(), start,
                                     row_max.data_ptr<float>(), row_sum.data_ptr<float>(),
                                     target_logit.data_ptr<float>(), stream);
    torch::Tensor global_max = row_max;
    if (c.size() > 1) {
      global_max = row_max.clone();
      c.all_reduce(global_max, dist::ReduceOp::kMax);
      row_sum.mul_((row_max - global_max).exp_());
      c.all_reduce(row_sum, dist::ReduceOp::kSum);
      c.all_reduce(target_logit, dist::ReduceOp::kSum);
    }
    torch::Tensor loss = row_sum.log() + global_max - target_logit;  // [rows] fp32
    ctx->save_for_backward({x, t, global_max, row_sum.reciprocal()});
    ctx->saved_data["start"] = start;
    ctx->saved_data["valid"] = valid;
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

torch::Tensor fused_vocab_parallel_cross_entropy(const torch::Tensor& logits, const torch::Tensor& target,
                                                 const dist::CommunicatorPtr& tp, int64_t valid_columns) {
  MEGATON_ASSERT(logits.is_cuda(), "fused cross-entropy needs CUDA logits");
  return FusedVocabParallelCrossEntropy::apply(logits, target, tp, valid_columns);
}

}  // namespace megaton::parallel
