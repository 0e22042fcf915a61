// The fused CUDA cross-entropy (kernels/cross_entropy_kernels.cu) against the unfused ATen path: per-token loss and
// logits gradient for fp32 and bf16 logits, rows whose length is and is not a multiple of the 16-byte vector width,
// -inf padding columns, and targets at the first and last real column. Skipped without CUDA (CPU builds and
// machines; the valid_columns test of the ATen path runs everywhere); run on the GPU machine by perf/gpu/run.sh.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>

#include "dist/self_communicator.h"
#include "parallel/tensor/cross_entropy.h"

using namespace megaton;

namespace {

struct Result {
  torch::Tensor loss, grad;
};

Result run(const torch::Tensor& logits_in, const torch::Tensor& target, const torch::Tensor& grad_loss, bool fused,
           int64_t valid_columns = -1) {
  torch::Tensor logits = logits_in.detach().clone().requires_grad_(true);
  auto tp = dist::single_rank_groups().tp;
  torch::Tensor loss = parallel::vocab_parallel_cross_entropy(logits, target, tp, valid_columns, fused);
  loss.backward(grad_loss);
  return {loss.detach().to(torch::kCPU, torch::kFloat64), logits.grad().to(torch::kCPU, torch::kFloat64)};
}

// padding > 0: the last `padding` columns are padding, given as -inf logits (inf_padding) or as valid_columns.
void compare(torch::ScalarType dtype, int64_t s, int64_t b, int64_t v, int64_t padding, double loss_tol,
             double grad_tol, bool inf_padding = true) {
  torch::manual_seed(11);
  auto opts = torch::TensorOptions().device(torch::kCUDA);
  torch::Tensor logits = (torch::randn({s, b, v}, opts) * 3).to(dtype);  // [s, b, v]
  if (padding > 0 && inf_padding)
    logits.narrow(-1, v - padding, padding).fill_(-std::numeric_limits<float>::infinity());
  const int64_t valid = padding > 0 && !inf_padding ? v - padding : -1;
  torch::Tensor target = torch::randint(0, v - padding, {s, b}, opts.dtype(torch::kInt64));  // [s, b]
  target[0][0] = 0;
  target[s - 1][b - 1] = v - padding - 1;
  torch::Tensor grad_loss = torch::rand({s, b}, opts);
  const Result ref = run(logits, target, grad_loss, false, valid), got = run(logits, target, grad_loss, true, valid);
  EXPECT_LT((ref.loss - got.loss).abs().max().item<double>(), loss_tol) << c10::toString(dtype) << " v=" << v;
  EXPECT_LT((ref.grad - got.grad).abs().max().item<double>(), grad_tol) << c10::toString(dtype) << " v=" << v;
  if (padding > 0) {
    EXPECT_EQ(got.grad.narrow(-1, v - padding, padding).abs().max().item<double>(), 0.0);
  }
}

}  // namespace

TEST(KernelsCrossEntropy, FusedMatchesAtenFp32) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  compare(torch::kFloat32, 16, 4, 1024, 0, 2e-5, 1e-6);   // vector path
  compare(torch::kFloat32, 7, 3, 1001, 0, 2e-5, 1e-6);    // scalar path (row not 16-byte aligned)
  compare(torch::kFloat32, 8, 2, 50304, 47, 5e-5, 1e-6);  // GPT-2's padded vocabulary with -inf padding
  compare(torch::kFloat32, 8, 2, 50304, 47, 5e-5, 1e-6, /*inf_padding=*/false);  // padding by valid_columns
}

TEST(KernelsCrossEntropy, FusedMatchesAtenBf16) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // Both paths read the same bf16 values and compute in fp32; the gradients are rounded to bf16 (rel. 2^-8).
  compare(torch::kBFloat16, 16, 4, 1024, 0, 2e-5, 4e-3);
  compare(torch::kBFloat16, 5, 3, 999, 0, 2e-5, 4e-3);
  compare(torch::kBFloat16, 8, 2, 50304, 47, 5e-5, 4e-3);
  compare(torch::kBFloat16, 8, 2, 50304, 47, 5e-5, 4e-3, /*inf_padding=*/false);
}

// The ATen path (CPU here): padding given by valid_columns gives the loss and gradients of -inf padding logits, and
// no gradient on the padding columns.
TEST(KernelsCrossEntropy, ValidColumnsActAsMinusInfinityPadding) {
  torch::manual_seed(5);
  const int64_t v = 40, pad = 7;
  torch::Tensor logits = torch::randn({6, 3, v}, torch::kFloat64) * 2;  // [s, b, v]
  torch::Tensor target = torch::randint(0, v - pad, {6, 3}, torch::kInt64);
  torch::Tensor grad_loss = torch::rand({6, 3}, torch::kFloat64);
  torch::Tensor masked = logits.clone();
  masked.narrow(-1, v - pad, pad).fill_(-std::numeric_limits<double>::infinity());
  const Result by_inf = run(masked, target, grad_loss, false),
               by_count = run(logits, target, grad_loss, false, v - pad);
  EXPECT_LT((by_inf.loss - by_count.loss).abs().max().item<double>(), 1e-12);
  EXPECT_LT((by_inf.grad - by_count.grad).abs().max().item<double>(), 1e-12);
  EXPECT_EQ(by_count.grad.narrow(-1, v - pad, pad).abs().max().item<double>(), 0.0);
  // Without valid_columns the same logits give another loss: the count is really used.
  const Result unmasked = run(logits, target, grad_loss, false);
  EXPECT_GT((unmasked.loss - by_count.loss).abs().max().item<double>(), 1e-3);
}
