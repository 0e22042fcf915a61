// ops::embedding with an fp32 main grad (gradient accumulation fusion for the lookup): the backward adds each id's
// summed output-gradient rows into the main grad (first zeroing it when its overwrite flag is set), the weight gets no
// autograd gradient, and the sums are those of torch::embedding's autograd.
//   OpsEmbedding.*           CPU (index_add_).
//   KernelsEmbeddingGrad.*   CUDA (a stable sort, then kernels/embedding_grad_kernels.cu) against an fp64 reference,
//                            on skewed ids; skipped without CUDA, run on the GPU machine by perf/gpu/run.sh.
#include "ops/embedding.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

using namespace megaton;

namespace {

double rel(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor x = a.to(torch::kFloat64).cpu(), y = b.to(torch::kFloat64).cpu();
  return (x - y).norm().item<double>() / std::max(y.norm().item<double>(), 1e-30);
}

// The dense weight gradient of weight[ids] for the output gradient dy [.., h]: fp64, [V, h].
torch::Tensor reference_grad(int64_t vocab, const torch::Tensor& ids, const torch::Tensor& dy) {
  const int64_t h = dy.size(-1);
  return torch::zeros({vocab, h}, torch::kFloat64)
      .index_add_(0, ids.reshape({-1}).cpu(), dy.reshape({-1, h}).to(torch::kFloat64).cpu());
}

}  // namespace

TEST(OpsEmbedding, LookupGradientGoesIntoTheMainGradAcrossBackwards) {
  torch::manual_seed(31);
  torch::Tensor w = torch::randn({11, 6}, torch::kFloat32).requires_grad_();
  torch::Tensor ids = torch::tensor({3, 0, 3, 10, 3, 7, 0, 2}, torch::kInt64).view({4, 2});  // repeats
  torch::Tensor dy = torch::randn({4, 2, 6}, torch::kFloat32);
  torch::Tensor main = torch::full({11, 6}, 0.5, torch::kFloat32);  // starts non-zero: the backward adds to it
  for (int i = 0; i < 2; ++i) {
    torch::Tensor y = ops::embedding(w, ids, main);
    EXPECT_TRUE(torch::equal(y, torch::embedding(w, ids)));
    y.backward(dy);
  }
  EXPECT_FALSE(w.grad().defined()) << "the weight's gradient must only go to the main grad";
  EXPECT_LT(rel(main - 0.5, 2 * reference_grad(11, ids, dy)), 1e-6);
  EXPECT_TRUE(torch::equal(main[1], torch::full({6}, 0.5))) << "an id not looked up got a gradient";
}

TEST(OpsEmbedding, FirstWriteZeroesThenAdds) {
  torch::manual_seed(32);
  torch::Tensor w = torch::randn({9, 4}, torch::kFloat32).requires_grad_();
  torch::Tensor ids = torch::tensor({1, 1, 8, 4}, torch::kInt64), dy = torch::randn({4, 4}, torch::kFloat32);
  const ops::MainGrad m{torch::full({9, 4}, std::nan(""), torch::kFloat32), torch::ones({1}, torch::kBool)};
  ops::embedding(w, ids, m).backward(dy);
  EXPECT_FALSE(m.overwrite.item<bool>());
  EXPECT_LT(rel(m.grad, reference_grad(9, ids, dy)), 1e-6) << "the old values (NaN) must be gone, untouched rows 0";
  ops::embedding(w, ids, m).backward(dy);
  EXPECT_LT(rel(m.grad, 2 * reference_grad(9, ids, dy)), 1e-6);
}

TEST(OpsEmbedding, WithoutMainGradItIsTorchEmbedding) {
  torch::Tensor w = torch::randn({5, 3}, torch::kFloat64).requires_grad_();
  torch::Tensor ids = torch::tensor({4, 4, 0}, torch::kInt64), dy = torch::randn({3, 3}, torch::kFloat64);
  ops::embedding(w, ids, {}).backward(dy);
  ASSERT_TRUE(w.grad().defined());
  EXPECT_LT(rel(w.grad(), reference_grad(5, ids, dy)), 1e-14);
}

#ifdef MEGATON_HAVE_CUDA
// The kernel on ids as text makes them: one frequent id (a long segment, read on past a block's chunk), a few common
// ones, a long tail, ids spanning every chunk boundary; bf16/fp16/fp32 gradients, h a multiple of the 16-byte vector
// and not; against the fp64 sums. The same inputs twice give the same bits (one block per id, a fixed order).
TEST(KernelsEmbeddingGrad, MatchesAtenOnSkewedIdsAndIsDeterministic) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  for (torch::ScalarType dtype : {torch::kBFloat16, torch::kFloat16, torch::kFloat32}) {
    for (int64_t h : {768, 100}) {
      torch::manual_seed(33 + h);
      const int64_t vocab = 5000, n = 20000;
      torch::Tensor ids = torch::randint(0, vocab, {n}, cuda.dtype(torch::kInt64));
      ids.masked_fill_(torch::rand({n}, cuda) < 0.15, 17);                               // ~3000 rows of one id
      ids.masked_fill_(torch::rand({n}, cuda) < 0.05, 4999);                             // the last row of the table
      torch::Tensor grad = torch::randn({n, h}, cuda.dtype(torch::kFloat32)).to(dtype);  // [n, h]
      torch::Tensor start = torch::randn({vocab, h}, cuda.dtype(torch::kFloat32));
      torch::Tensor main = start.clone(), again = start.clone();
      ASSERT_TRUE(ops::accumulate_embedding_grad_cuda(main, ids, grad));
      ASSERT_TRUE(ops::accumulate_embedding_grad_cuda(again, ids, grad));
      const std::string where = std::string(c10::toString(dtype)) + " h " + std::to_string(h);
      EXPECT_LT(rel(main - start, reference_grad(vocab, ids, grad)), 1e-6) << where;
      EXPECT_TRUE(torch::equal(main, again)) << where << ": two runs differ";
    }
  }
}
#endif  // MEGATON_HAVE_CUDA
