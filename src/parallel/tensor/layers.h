// Tensor-parallel layers (Megatron's mpu/layers.py) over the TP group's Communicator. Each owns its shard of the
// weight (created through a ParamFactory, so its values are those of the TP=1 model's slice).
//
//   ColumnParallelLinear  Y = X A^T + b, A split along its output rows:  X [.., in] -> Y [.., out/tp]
//   RowParallelLinear     Y = X A^T + b, A split along its input columns: X [.., in/tp] -> Y [.., out] (all-reduced)
//   VocabParallelEmbedding  ids -> rows of E [V, h], E split along the vocabulary; the rows other ranks own are zero
//                           locally and the sum over the group completes the lookup.
#pragma once
#include <torch/torch.h>

#include <string>
#include <vector>

#include "dist/communicator.h"
#include "ops/fp8/fp8_linear.h"
#include "parallel/param_factory.h"

namespace megaton::parallel {

// ~~~ ColumnParallelLinear ~~~
struct ColumnParallelOptions {
  int64_t in = 0;
  int64_t out = 0;  // global output features
  bool bias = true;
  bool gather_output = false;
  InitSpec init = InitSpec::normal(0.02);
  /// Canonical global layout of the weight, a reshape of [out, in] whose split dimension is `partition_dim`
  /// (default [out, in], 0). Fused QKV: [heads, 3, head_dim, in], 0. GLU fc1: [2, ffn, in], 1. The bias's canonical
  /// shape is this minus the last dimension.
  std::vector<int64_t> canonical_shape;
  int partition_dim = 0;
  double weight_lr_scale = 1.0;  // ParamInfo::lr_scale of the weight
};

class ColumnParallelLinear {
 public:
  ColumnParallelLinear(ParamFactory& f, const std::string& name, ColumnParallelOptions o, dist::CommunicatorPtr tp);
  /// x [.., in] -> [.., out/tp] (or [.., out] with gather_output).
  torch::Tensor forward(const torch::Tensor& x) const;
  /// forward with the bias added outside autograd (bias.detach()): the caller gives the bias its gradient
  /// (ops::split_qkv does, from the same pass that assembles the QKV gradient).
  torch::Tensor forward_bias_grad_elsewhere(const torch::Tensor& x) const;
  /// gelu_tanh(forward(x)). Under FP8 with a bias (and no gather_output) the GELU runs in the GEMM's epilogue and its
  /// backward with the bias gradient in one kernel (ops::fp8::fp8_linear_gelu); otherwise forward, then the GELU.
  torch::Tensor forward_gelu(const torch::Tensor& x) const;

  torch::Tensor weight;  // [out/tp, in]
  torch::Tensor bias;    // [out/tp] (undefined without bias)
  /// The weight's fp32 main grad and its first-write flag once bound (gradient accumulation fusion), else undefined
  /// (parallel/main_grads.h).
  ops::MainGrad main_grad() const { return main_grads_->of(weight); }
  /// The bias's, likewise (undefined without a bias).
  ops::MainGrad bias_main_grad() const { return bias.defined() ? main_grads_->of(bias) : ops::MainGrad{}; }
  /// The weight's FP8 slots: defined when the GEMMs run in FP8.
  const ops::fp8::Fp8LinearSlots& fp8_slots() const { return fp8_; }

 private:
  // gelu: fp8_linear_gelu (FP8, no gather_output)
  torch::Tensor forward_with_bias(const torch::Tensor& x, const torch::Tensor& b, bool gelu = false) const;

  ColumnParallelOptions o_;
  dist::CommunicatorPtr tp_;
  MainGradsPtr main_grads_;
  ops::fp8::Fp8LinearSlots fp8_;  // defined when the factory had an FP8 scaling table: the GEMMs run in FP8
};

// ~~~ RowParallelLinear ~~~
struct RowParallelOptions {
  int64_t in = 0;  // global input features
  int64_t out = 0;
  bool bias = true;
  bool input_is_parallel = true;
  InitSpec init = InitSpec::normal(0.02);
  double weight_lr_scale = 1.0;  // ParamInfo::lr_scale of the weight
};

class RowParallelLinear {
 public:
  RowParallelLinear(ParamFactory& f, const std::string& name, RowParallelOptions o, dist::CommunicatorPtr tp);
  /// x [.., in/tp] (or [.., in] unless input_is_parallel) -> [.., out], bias added after the reduction.
  torch::Tensor forward(const torch::Tensor& x) const;

  torch::Tensor weight;  // [out, in/tp]
  torch::Tensor bias;    // [out], replicated
  const dist::CommunicatorPtr& tp() const { return tp_; }
  /// As ColumnParallelLinear::main_grad and bias_main_grad.
  ops::MainGrad main_grad() const { return main_grads_->of(weight); }
  ops::MainGrad bias_main_grad() const { return bias.defined() ? main_grads_->of(bias) : ops::MainGrad{}; }
  const ops::fp8::Fp8LinearSlots& fp8_slots() const { return fp8_; }

 private:
  torch::Tensor gemm(const torch::Tensor& x, const torch::Tensor& b, const ops::MainGrad& b_main) const;

  RowParallelOptions o_;
  dist::CommunicatorPtr tp_;
  MainGradsPtr main_grads_;
  ops::fp8::Fp8LinearSlots fp8_;  // as ColumnParallelLinear's
};

// ~~~ VocabParallelEmbedding ~~~
class VocabParallelEmbedding {
 public:
  /// `padded_vocab` rows, of which the first `vocab` are real (the rest stay zero); split over TP along rows.
  VocabParallelEmbedding(ParamFactory& f, const std::string& name, int64_t vocab, int64_t padded_vocab, int64_t hidden,
                         InitSpec init, dist::CommunicatorPtr tp, bool tied_embedding);
  /// ids [..] (int64) -> [.., h], complete on every TP rank.
  torch::Tensor forward(const torch::Tensor& ids) const;

  int64_t vocab_start() const { return start_; }
  int64_t vocab_end() const { return end_; }
  /// As ColumnParallelLinear::main_grad: the lookup's backward adds the weight's gradient into it once bound.
  ops::MainGrad main_grad() const { return main_grads_->of(weight); }

  torch::Tensor weight;  // [padded_vocab/tp, h]
 private:
  int64_t start_ = 0, end_ = 0;
  dist::CommunicatorPtr tp_;
  MainGradsPtr main_grads_;
};

/// Logits of the (tied or untied) output layer: hidden [s, b, h] x weight [V/tp, h] -> [s, b, V/tp], each rank its
/// vocabulary slice (Megatron's parallel_lm_logits without gathering).
torch::Tensor parallel_lm_logits(const torch::Tensor& hidden, const torch::Tensor& weight,
                                 const dist::CommunicatorPtr& tp);

}  // namespace megaton::parallel
