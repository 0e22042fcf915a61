// parallel::lm_head_cross_entropy (the LM head and its loss in one autograd op, the logits' gradient written in the
// forward pass) against the two ops it replaces, parallel_lm_logits + vocab_parallel_cross_entropy on ATen: the losses,
// and the gradients of the hidden states and of the weight under a per-token loss gradient that differs from row to
// row (a loss mask), with padding columns.
//   LmHeadLoss.*        the ATen path (CPU), fp64 and fp32.
//   KernelsLmHeadLoss.* CUDA: cross_entropy_loss_grad_'s kernels (one pass with the row in shared memory; the
//                       two-kernel fallback for rows that are not 16-byte aligned) against its ATen path, and the
//                       whole op in bf16 and fp32. Skipped without CUDA; run on the GPU by perf/gpu/run.sh.
#include "parallel/tensor/lm_head_loss.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "dist/self_communicator.h"
#include "parallel/tensor/cross_entropy.h"
#include "parallel/tensor/layers.h"
#ifdef MEGATON_HAVE_CUDA
#include <c10/cuda/CUDAStream.h>

#include "cross_entropy_kernels.h"  // kernels/
#endif

using namespace megaton;

namespace {

struct Grads {
  torch::Tensor loss, d_hidden, d_weight;  // fp64 on the CPU
};

// Losses [s, b] and gradients of sum(losses * g) for the fused op (fused = true) or the two unfused ATen ops.
Grads run(const torch::Tensor& hidden_in, const torch::Tensor& weight_in, const torch::Tensor& target,
          const torch::Tensor& g, int64_t valid_columns, bool fused, bool fused_kernels) {
  torch::Tensor hidden = hidden_in.detach().clone().requires_grad_(true);
  torch::Tensor weight = weight_in.detach().clone().requires_grad_(true);
  auto tp = dist::single_rank_groups().tp;
  torch::Tensor loss = fused ? parallel::lm_head_cross_entropy(hidden, weight, target, tp, valid_columns, fused_kernels)
                             : parallel::vocab_parallel_cross_entropy(parallel::parallel_lm_logits(hidden, weight, tp),
                                                                      target, tp, valid_columns, /*use_fused=*/false);
  loss.backward(g);
  auto cpu = [](const torch::Tensor& t) { return t.detach().to(torch::kCPU, torch::kFloat64); };
  return {cpu(loss), cpu(hidden.grad()), cpu(weight.grad())};
}

double max_rel(const torch::Tensor& got, const torch::Tensor& ref) {
  return ((got - ref).abs().max() / ref.abs().max()).item<double>();
}

// s x b tokens, hidden h, vocabulary v of which the last `padding` columns are padding.
void compare(torch::ScalarType dtype, torch::Device device, int64_t v, int64_t padding, double tol,
             bool fused_kernels = true) {
  torch::manual_seed(23);
  const int64_t s = 6, b = 3, h = 16;
  auto o = torch::TensorOptions().dtype(torch::kFloat64);
  torch::Tensor hidden = torch::randn({s, b, h}, o).to(device, dtype),
                weight = torch::randn({v, h}, o).to(device, dtype);
  torch::Tensor target = torch::randint(0, v - padding, {s, b}, torch::kInt64).to(device);  // [s, b]
  target[0][0] = v - padding - 1;
  // A masked mean's loss gradient: 0 on masked tokens, else 1 / (unmasked count), here also scaled per row.
  torch::Tensor g = (torch::rand({s, b}, o) * (torch::rand({s, b}, o) > 0.2)).to(device, torch::kFloat32);
  if (dtype == torch::kFloat64) g = g.to(torch::kFloat64);
  const int64_t valid = padding > 0 ? v - padding : -1;
  const Grads ref = run(hidden, weight, target, g, valid, false, false);
  const Grads got = run(hidden, weight, target, g, valid, true, fused_kernels);
  const std::string what = std::string(c10::toString(dtype)) + " v=" + std::to_string(v) + " on " + device.str();
  EXPECT_LT(max_rel(got.loss, ref.loss), tol) << what;
  EXPECT_LT(max_rel(got.d_hidden, ref.d_hidden), tol) << what;
  EXPECT_LT(max_rel(got.d_weight, ref.d_weight), tol) << what;
  if (padding > 0) {
    EXPECT_EQ(got.d_weight.narrow(0, v - padding, padding).abs().max().item<double>(), 0.0) << what;
  }
}

}  // namespace

TEST(LmHeadLoss, MatchesLogitsThenCrossEntropyFp64) {
  compare(torch::kFloat64, torch::kCPU, 40, 0, 1e-12);
  compare(torch::kFloat64, torch::kCPU, 48, 5, 1e-12);
}

TEST(LmHeadLoss, MatchesLogitsThenCrossEntropyFp32) {
  compare(torch::kFloat32, torch::kCPU, 48, 5, 1e-5);
}

// bf16: the backward's row scaling computes in fp32 (the loss gradient's dtype) and rounds once to bf16.
TEST(LmHeadLoss, MatchesLogitsThenCrossEntropyBf16) {
  compare(torch::kBFloat16, torch::kCPU, 48, 5, 2e-2);
}

// Without autograd the op still returns the losses (the gradient it writes over its own logits is dropped).
TEST(LmHeadLoss, NoGradGivesTheSameLosses) {
  torch::manual_seed(3);
  torch::Tensor hidden = torch::randn({4, 2, 8}, torch::kFloat64), weight = torch::randn({24, 8}, torch::kFloat64);
  torch::Tensor target = torch::randint(0, 24, {4, 2}, torch::kInt64);
  auto tp = dist::single_rank_groups().tp;
  torch::Tensor ref =
      parallel::vocab_parallel_cross_entropy(parallel::parallel_lm_logits(hidden, weight, tp), target, tp, -1, false);
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::allclose(parallel::lm_head_cross_entropy(hidden, weight, target, tp), ref, 1e-12, 1e-12));
}

// Gradient accumulation fusion: with the weight's main grad, d_weight is written into it (its first write of the
// iteration), then added, and the weight gets no autograd gradient; d_hidden is unchanged.
TEST(LmHeadLoss, WeightGradientGoesIntoTheMainGrad) {
  torch::manual_seed(4);
  const int64_t s = 5, b = 2, h = 8, v = 24;
  torch::Tensor hidden = torch::randn({s, b, h}), weight = torch::randn({v, h});
  torch::Tensor target = torch::randint(0, v, {s, b}, torch::kInt64), g = torch::rand({s, b});
  auto tp = dist::single_rank_groups().tp;
  const Grads ref = run(hidden, weight, target, g, -1, true, true);
  torch::Tensor main = torch::full({v, h}, 7.0f), flag = torch::ones({1}, torch::kBool);
  for (int pass = 1; pass <= 2; ++pass) {
    torch::Tensor x = hidden.clone().requires_grad_(true), w = weight.clone().requires_grad_(true);
    parallel::lm_head_cross_entropy(x, w, target, tp, -1, true, {main, flag}).backward(g);
    EXPECT_FALSE(w.grad().defined());
    EXPECT_FALSE(flag.item<bool>());
    EXPECT_TRUE(torch::allclose(x.grad().to(torch::kFloat64), ref.d_hidden, 1e-5, 1e-6));
    EXPECT_TRUE(torch::allclose(main.to(torch::kFloat64), pass * ref.d_weight, 1e-5, 1e-5)) << "pass " << pass;
  }
}

#ifdef MEGATON_HAVE_CUDA
// The kernels' loss and in-place gradient against the ATen path of cross_entropy_loss_grad_ on the same logits.
TEST(KernelsLmHeadLoss, LossGradKernelsMatchAten) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto tp = dist::single_rank_groups().tp;
  for (torch::ScalarType dtype : {torch::kFloat32, torch::kBFloat16}) {
    // 50304 (GPT-2's padded vocabulary, 47 padding columns): one pass in shared memory; 1001: not 16-byte aligned rows,
    // the row statistics and the in-place gradient kernel.
    for (auto [v, valid] : {std::pair<int64_t, int64_t>{50304, 50257}, {1001, -1}, {1024, 1000}}) {
      torch::manual_seed(5);
      const auto o = torch::TensorOptions().device(torch::kCUDA);
      const int64_t rows = 37;
      torch::Tensor logits = (torch::randn({rows, v}, o) * 3).to(dtype);
      torch::Tensor target = torch::randint(0, valid < 0 ? v : valid, {rows}, o.dtype(torch::kInt64));
      torch::Tensor ref = logits.clone(), got = logits.clone();
      const torch::Tensor ref_loss = parallel::cross_entropy_loss_grad_(ref, target, tp, valid, false);
      const double grad_tol = dtype == torch::kFloat32 ? 1e-6 : 4e-3;  // bf16: an ulp of values up to 1
      auto expect_matches = [&](const torch::Tensor& loss, const torch::Tensor& grad, const std::string& what) {
        EXPECT_LT((loss - ref_loss).abs().max().item<double>(), 5e-5) << what;
        EXPECT_LT((grad.to(torch::kFloat32) - ref.to(torch::kFloat32)).abs().max().item<double>(), grad_tol) << what;
        if (valid > 0) {
          EXPECT_EQ(grad.narrow(1, valid, v - valid).abs().max().item<double>(), 0.0) << what;
        }
      };
      const std::string what = std::string(c10::toString(dtype)) + " v=" + std::to_string(v);
      const torch::Tensor got_loss = parallel::cross_entropy_loss_grad_(got, target, tp, valid, true);
      expect_matches(got_loss, got, what);
      // Every variant of the one-pass kernel directly (those a row is not taken by launch nothing).
      for (auto variant : {kernels::LossGradVariant::kSharedRow, kernels::LossGradVariant::kCluster4,
                           kernels::LossGradVariant::kCluster8, kernels::LossGradVariant::kL2}) {
        torch::Tensor x = logits.clone(), loss = torch::empty({rows}, o.dtype(torch::kFloat32));
        const auto type = dtype == torch::kFloat32 ? kernels::FloatType::kFloat32 : kernels::FloatType::kBFloat16;
        const bool taken = kernels::cross_entropy_loss_grad(x.data_ptr(), type, rows, v, valid < 0 ? v : valid,
                                                            target.data_ptr<int64_t>(), loss.data_ptr<float>(),
                                                            c10::cuda::getCurrentCUDAStream().stream(), variant);
        EXPECT_EQ(taken, v % 8 == 0) << what << " variant " << static_cast<int>(variant);  // aligned rows on an H200
        if (taken) expect_matches(loss, x, what + " variant " + std::to_string(static_cast<int>(variant)));
      }
    }
  }
}

TEST(KernelsLmHeadLoss, MatchesLogitsThenCrossEntropy) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  compare(torch::kFloat32, torch::kCUDA, 50304, 47, 1e-5);
  compare(torch::kFloat32, torch::kCUDA, 1001, 0, 1e-5);
  compare(torch::kBFloat16, torch::kCUDA, 50304, 47, 2e-2);
}

// The backward's row scaling (kernels::scale_rows) is ATen's fp32 multiply rounded once: equal bit for bit, in place
// and out of place, for whole 16-byte rows and for rows that are not (the scalar kernel).
TEST(KernelsLmHeadLoss, ScaleRowsMatchesAtenBitForBit) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(9);
  const auto o = torch::TensorOptions().device(torch::kCUDA);
  for (torch::ScalarType dtype : {torch::kBFloat16, torch::kFloat16, torch::kFloat32}) {
    for (int64_t cols : {768, 24, 13}) {
      const int64_t rows = 1000;
      const torch::Tensor x = torch::randn({rows, cols}, o).to(dtype);
      const torch::Tensor g = torch::rand({rows, 1}, o) * (torch::rand({rows, 1}, o) > 0.1);  // [rows, 1] fp32
      torch::Tensor ref = torch::empty_like(x);
      torch::mul_out(ref, x, g);
      torch::Tensor out = torch::empty_like(x), in_place = x.clone();
      const std::string what = std::string(c10::toString(dtype)) + " cols=" + std::to_string(cols);
      ASSERT_TRUE(parallel::scale_rows_cuda(x, g, out)) << what;
      ASSERT_TRUE(parallel::scale_rows_cuda(in_place, g, in_place)) << what;
      EXPECT_TRUE(torch::equal(out, ref)) << what;
      EXPECT_TRUE(torch::equal(in_place, ref)) << what;
    }
  }
  // Not taken: a scale of another dtype or length, a non-contiguous x.
  torch::Tensor x = torch::randn({8, 16}, o).to(torch::kBFloat16), out = torch::empty_like(x);
  EXPECT_FALSE(parallel::scale_rows_cuda(x, torch::ones({8, 1}, o.dtype(torch::kFloat64)), out));
  EXPECT_FALSE(parallel::scale_rows_cuda(x, torch::ones({7, 1}, o), out));
  torch::Tensor out_t = torch::empty({16, 8}, x.options());
  EXPECT_FALSE(parallel::scale_rows_cuda(x.t(), torch::ones({16, 1}, o), out_t));
}
#endif
