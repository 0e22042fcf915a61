#include "parallel/tensor/layers.h"

#include "core/error.h"
#include "ops/embedding.h"
#include "ops/linear.h"
#include "parallel/tensor/mappings.h"

namespace megaton::parallel {

namespace {
std::vector<int64_t> drop_last(std::vector<int64_t> v) {
  v.pop_back();
  return v;
}
}  // namespace

ColumnParallelLinear::ColumnParallelLinear(ParamFactory& f, const std::string& name, ColumnParallelOptions o,
                                           dist::CommunicatorPtr tp)
    : o_(std::move(o)), tp_(std::move(tp)), main_grads_(f.main_grads()) {
  const int n = tp_->size();
  MEGATON_CHECK(o_.out % n == 0, UsageError, name, ": output features (", o_.out,
                ") must be divisible by --tensor-model-parallel-size (", n, ")");
  if (o_.canonical_shape.empty()) o_.canonical_shape = {o_.out, o_.in};
  int64_t numel = 1;
  for (int64_t d : o_.canonical_shape) numel *= d;
  MEGATON_ASSERT(numel == o_.out * o_.in && o_.canonical_shape.back() == o_.in, name,
                 ": canonical shape is not a reshape of [out, in] keeping in last");
  MEGATON_CHECK(o_.canonical_shape[o_.partition_dim] % n == 0, UsageError, name, ": dimension ", o_.partition_dim,
                " of ", o_.canonical_shape[o_.partition_dim], " is not divisible by --tensor-model-parallel-size (", n,
                ")");
  ParamRequest w{name + ".weight", o_.canonical_shape, o_.partition_dim, {o_.out / n, o_.in}, o_.init};
  w.lr_scale = o_.weight_lr_scale;
  weight = f.make(w);
  if (f.fp8_table() != nullptr) fp8_ = ops::fp8::register_fp8_linear(*f.fp8_table(), name + ".weight");
  if (o_.bias)
    bias = f.make({name + ".bias",
                   drop_last(o_.canonical_shape),
                   o_.partition_dim,
                   {o_.out / n},
                   InitSpec::zeros(),
                   0,
                   /*no_weight_decay=*/true});
}

torch::Tensor ColumnParallelLinear::forward(const torch::Tensor& x) const {
  return forward_with_bias(x, bias);
}

torch::Tensor ColumnParallelLinear::forward_bias_grad_elsewhere(const torch::Tensor& x) const {
  return forward_with_bias(x, bias.defined() ? bias.detach() : torch::Tensor());
}

torch::Tensor ColumnParallelLinear::forward_with_bias(const torch::Tensor& x, const torch::Tensor& b, bool gelu) const {
  // at::linear, not torch::nn::functional::linear: the latter runs matmul + a broadcast `+= bias` for 3-D inputs, the
  // former folds [s, b, in] to 2-D and adds the bias in the GEMM's epilogue (one pass less over the output).
  const ops::MainGrad b_main = b.defined() && b.requires_grad() ? bias_main_grad() : ops::MainGrad{};
  const torch::Tensor xp = copy_to_tp_region(x, tp_);
  if (gelu) return ops::fp8::fp8_linear_gelu(xp, weight, b, main_grad(), fp8_, b_main);  // [.., out/tp]
  torch::Tensor y = fp8_.defined() ? ops::fp8::fp8_linear(xp, weight, b, main_grad(), fp8_, b_main)
                                   : ops::linear(xp, weight, b, main_grad(), b_main);  // [.., out/tp]
  return o_.gather_output ? gather_from_tp_region(y, tp_) : y;
}

torch::Tensor ColumnParallelLinear::forward_gelu(const torch::Tensor& x) const {
  // (FP8 with a bias, and no gather_output to come between the GEMM and the GELU)
  const bool fused = fp8_.defined() && bias.defined() && !o_.gather_output;
  return fused ? forward_with_bias(x, bias, /*gelu=*/true) : torch::gelu(forward(x), "tanh");
}

RowParallelLinear::RowParallelLinear(ParamFactory& f, const std::string& name, RowParallelOptions o,
                                     dist::CommunicatorPtr tp)
    : o_(std::move(o)), tp_(std::move(tp)), main_grads_(f.main_grads()) {
  const int n = tp_->size();
  MEGATON_CHECK(o_.in % n == 0, UsageError, name, ": input features (", o_.in,
                ") must be divisible by --tensor-model-parallel-size (", n, ")");
  ParamRequest w{name + ".weight", {o_.out, o_.in}, 1, {o_.out, o_.in / n}, o_.init};
  w.lr_scale = o_.weight_lr_scale;
  weight = f.make(w);
  if (f.fp8_table() != nullptr) fp8_ = ops::fp8::register_fp8_linear(*f.fp8_table(), name + ".weight");
  if (o_.bias) bias = f.make({name + ".bias", {o_.out}, -1, {}, InitSpec::zeros(), 0, /*no_weight_decay=*/true});
}

torch::Tensor RowParallelLinear::forward(const torch::Tensor& x) const {
  torch::Tensor xp = o_.input_is_parallel ? x : scatter_to_tp_region(x, tp_);
  // One rank: the bias goes into the GEMM's epilogue. Several: it is added once, after the reduction (Megatron).
  if (tp_->size() == 1) return gemm(xp, bias, bias_main_grad());                // [.., out]
  torch::Tensor y = reduce_from_tp_region(gemm(xp, {}, ops::MainGrad{}), tp_);  // [.., out]
  return bias.defined() ? y + bias : y;
}

torch::Tensor RowParallelLinear::gemm(const torch::Tensor& x, const torch::Tensor& b,
                                      const ops::MainGrad& b_main) const {
  return fp8_.defined() ? ops::fp8::fp8_linear(x, weight, b, main_grad(), fp8_, b_main)
                        : ops::linear(x, weight, b, main_grad(), b_main);
}

VocabParallelEmbedding::VocabParallelEmbedding(ParamFactory& f, const std::string& name, int64_t vocab,
                                               int64_t padded_vocab, int64_t hidden, InitSpec init,
                                               dist::CommunicatorPtr tp, bool tied_embedding)
    : tp_(std::move(tp)), main_grads_(f.main_grads()) {
  const int n = tp_->size();
  MEGATON_CHECK(padded_vocab % n == 0, UsageError, "padded vocabulary (", padded_vocab,
                ") must be divisible by --tensor-model-parallel-size (", n, ")");
  MEGATON_ASSERT(vocab <= padded_vocab, "vocabulary ", vocab, " larger than its padded size ", padded_vocab);
  const int64_t per = padded_vocab / n;
  start_ = per * tp_->rank();
  end_ = start_ + per;
  weight = f.make({name, {padded_vocab, hidden}, 0, {}, init, vocab, false, tied_embedding, true});
}

torch::Tensor VocabParallelEmbedding::forward(const torch::Tensor& ids) const {
  if (tp_->size() == 1) return ops::embedding(weight, ids, main_grad());
  torch::Tensor outside = (ids < start_).logical_or(ids >= end_);  // [..]
  torch::Tensor local = (ids - start_).masked_fill(outside, 0);    // [..]
  torch::Tensor out = ops::embedding(weight, local, main_grad());  // [.., h]
  out = out.masked_fill(outside.unsqueeze(-1), 0.0);
  return reduce_from_tp_region(out, tp_);
}

torch::Tensor parallel_lm_logits(const torch::Tensor& hidden, const torch::Tensor& weight,
                                 const dist::CommunicatorPtr& tp) {
  return torch::matmul(copy_to_tp_region(hidden, tp), weight.t());  // [s, b, V/tp]
}

}  // namespace megaton::parallel
