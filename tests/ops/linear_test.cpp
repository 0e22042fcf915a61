// ops::linear and ops::bias_gelu_mlp with fp32 main grads (gradient accumulation fusion): the weight gradient is added
// into the main grad (across backward calls, as over micro-batches), the weight gets no autograd gradient, and every
// other gradient is what torch::linear's autograd gives. MainGrads finds a parameter's main grad by its storage and
// keeps the first-write flags (a main grad not zeroed for an iteration is overwritten by its first gradient).
//   OpsLinear.*         CPU, fp64/fp32 (the ATen addmm_ path).
//   KernelsOpsLinear.*  CUDA bf16/fp16 (one cublasGemmEx into the fp32 main grad) against an fp32 reference; skipped
//                       without CUDA, run on the GPU machine by perf/gpu/run.sh.
#include "ops/linear.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <utility>
#include <vector>

#include "ops/gemm_epilogue.h"
#include "parallel/data/main_grads.h"

using namespace megaton;

namespace {

struct Case {
  torch::Tensor x, w, b, dy;  // x [s, b, in], w [out, in], b [out], dy [s, b, out]
};

Case make_case(torch::TensorOptions o) {
  torch::manual_seed(21);
  auto r = [&](std::vector<int64_t> shape) { return torch::randn(shape, torch::kFloat64).to(o); };
  return {r({5, 3, 16}), r({24, 16}) * 0.25, r({24}), r({5, 3, 24})};
}

double rel(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor x = a.to(torch::kFloat64).cpu(), y = b.to(torch::kFloat64).cpu();
  return (x - y).norm().item<double>() / std::max(y.norm().item<double>(), 1e-30);
}

}  // namespace

TEST(OpsLinear, WeightGradientGoesIntoTheMainGradAcrossBackwards) {
  Case c = make_case(torch::kFloat64);
  // Reference: torch::linear's autograd, two backward calls accumulating in w.grad.
  torch::Tensor x0 = c.x.clone().requires_grad_(), w0 = c.w.clone().requires_grad_(), b0 = c.b.clone().requires_grad_();
  for (int i = 0; i < 2; ++i) torch::linear(x0, w0, b0).backward(c.dy);

  torch::Tensor x1 = c.x.clone().requires_grad_(), w1 = c.w.clone().requires_grad_(), b1 = c.b.clone().requires_grad_();
  torch::Tensor main = torch::full({24, 16}, 0.5, torch::kFloat32);  // starts non-zero: the GEMM adds to it
  for (int i = 0; i < 2; ++i) {
    torch::Tensor y = ops::linear(x1, w1, b1, main);
    EXPECT_LT(rel(y, torch::linear(c.x, c.w, c.b)), 1e-14);
    y.backward(c.dy);
  }
  EXPECT_FALSE(w1.grad().defined()) << "the weight's gradient must only go to the main grad";
  EXPECT_LT(rel(main - 0.5, w0.grad()), 1e-6);  // fp32 main grad
  EXPECT_LT(rel(x1.grad(), x0.grad()), 1e-14);
  EXPECT_LT(rel(b1.grad(), b0.grad()), 1e-14);
}

TEST(OpsLinear, WithoutMainGradItIsTorchLinear) {
  Case c = make_case(torch::kFloat64);
  torch::Tensor w = c.w.clone().requires_grad_();
  ops::linear(c.x, w, {}, {}).backward(c.dy);
  EXPECT_LT(rel(w.grad(), torch::mm(c.dy.reshape({-1, 24}).t(), c.x.reshape({-1, 16}))), 1e-14);
}

TEST(OpsLinear, BiasGeluMlpAddsBothWeightGradientsToMainGrads) {
  torch::manual_seed(4);
  auto p = [](std::vector<int64_t> s) { return torch::randn(s, torch::kFloat64).requires_grad_(); };
  torch::Tensor x = p({6, 2, 8}), w1 = p({32, 8}), b1 = p({32}), w2 = p({8, 32}), b2 = p({8});
  torch::Tensor dy = torch::randn({6, 2, 8}, torch::kFloat64);
  ops::bias_gelu_mlp(x, w1, b1, w2, b2, {}).backward(dy);
  const torch::Tensor gx = x.grad().clone(), g1 = w1.grad().clone(), g2 = w2.grad().clone(), gb1 = b1.grad().clone();
  for (torch::Tensor* t : {&x, &w1, &b1, &w2, &b2}) t->mutable_grad().reset();
  torch::Tensor m1 = torch::zeros({32, 8}, torch::kFloat32), m2 = torch::zeros({8, 32}, torch::kFloat32);
  ops::bias_gelu_mlp(x, w1, b1, w2, b2, {}, m1, m2).backward(dy);
  EXPECT_FALSE(w1.grad().defined());
  EXPECT_FALSE(w2.grad().defined());
  EXPECT_LT(rel(m1, g1), 1e-6);
  EXPECT_LT(rel(m2, g2), 1e-6);
  EXPECT_LT(rel(x.grad(), gx), 1e-12);
  EXPECT_LT(rel(b1.grad(), gb1), 1e-12);
}

TEST(MainGrads, FindsAParameterByItsStorageOffset) {
  parallel::MainGrads table;
  torch::Tensor params = torch::zeros({30}), grads = torch::arange(30, torch::kFloat32);
  torch::Tensor w = torch::empty({0});
  w.set_(params.storage(), 6, {3, 4}, {4, 1});  // elements 6..17 of the buffer
  EXPECT_FALSE(table.of(w).defined()) << "nothing bound yet";
  table.bind(params, grads);
  const torch::Tensor g = table.of(w).grad;
  ASSERT_TRUE(g.defined());
  EXPECT_EQ(g.sizes(), w.sizes());
  EXPECT_EQ(g[0][0].item<float>(), 6.0f);
  EXPECT_EQ(g[2][3].item<float>(), 17.0f);
  EXPECT_FALSE(table.of(torch::zeros({3, 4})).defined()) << "a tensor outside the buffer has no main grad";
}

// The first-write bookkeeping: of() registers a main grad (its range and a flag that starts false: the buffer was
// zeroed before anything was registered); begin_step sets every flag; zero_if_unwritten zeroes a flagged main grad
// once, and nothing that is not registered.
TEST(MainGrads, RegistersRangesAndZeroesOnlyUnwrittenOnes) {
  parallel::MainGrads table;
  torch::Tensor params = torch::zeros({30}), grads = torch::full({30}, 7.0f);
  table.bind(params, grads);
  torch::Tensor a = torch::empty({0}), b = torch::empty({0});
  a.set_(params.storage(), 2, {2, 3}, {3, 1});  // elements 2..7
  b.set_(params.storage(), 20, {4}, {1});       // elements 20..23
  const uint64_t v0 = table.version();
  const ops::MainGrad ma = table.of(a), mb = table.of(b);
  EXPECT_NE(table.version(), v0);
  const uint64_t v1 = table.version();
  table.of(a);
  EXPECT_EQ(table.version(), v1) << "asking again registers nothing new";
  EXPECT_EQ(table.ranges(), (std::vector<std::pair<int64_t, int64_t>>{{2, 8}, {20, 24}}));
  ASSERT_TRUE(ma.overwrite.defined());
  EXPECT_FALSE(ma.overwrite.item<bool>());
  table.begin_step();
  EXPECT_TRUE(ma.overwrite.item<bool>());
  EXPECT_TRUE(mb.overwrite.item<bool>());
  mb.overwrite.fill_(false);  // as weight_grad does after its first write
  EXPECT_TRUE(table.zero_if_unwritten(2));
  EXPECT_FALSE(table.zero_if_unwritten(9)) << "not registered";
  EXPECT_FALSE(ma.overwrite.item<bool>());
  EXPECT_EQ(grads.narrow(0, 2, 6).abs().sum().item<float>(), 0.0f);
  table.zero_unwritten();
  EXPECT_EQ(grads[20].item<float>(), 7.0f) << "written this step: kept";
  EXPECT_EQ(grads[0].item<float>(), 7.0f) << "not registered: not the table's to zero";
}

// weight_grad with the overwrite flag set: the product replaces whatever the main grad held (NaN included: beta 0
// reads nothing) and the flag is cleared, so the next call adds.
TEST(OpsLinear, FirstWriteOverwritesThenAdds) {
  torch::manual_seed(8);
  torch::Tensor dy = torch::randn({7, 5}, torch::kFloat64), x = torch::randn({7, 3}, torch::kFloat64);
  const ops::MainGrad m{torch::full({5, 3}, std::nan(""), torch::kFloat32), torch::ones({1}, torch::kBool)};
  ops::weight_grad(dy, x, m);
  const torch::Tensor once = torch::mm(dy.t(), x).to(torch::kFloat32);
  EXPECT_TRUE(torch::allclose(m.grad, once, 1e-6, 1e-6));
  EXPECT_FALSE(m.overwrite.item<bool>());
  ops::weight_grad(dy, x, m);
  EXPECT_TRUE(torch::allclose(m.grad, 2 * once, 1e-6, 1e-6));
}

#ifdef MEGATON_HAVE_CUDA
TEST(KernelsOpsLinear, HalfWeightGradientAccumulatesInFp32) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (torch::ScalarType dtype : {torch::kBFloat16, torch::kFloat16}) {
    const auto o = torch::TensorOptions().dtype(dtype).device(torch::kCUDA);
    torch::manual_seed(9);
    torch::Tensor dy = torch::randn({1000, 72}, o), x = torch::randn({1000, 40}, o);
    torch::Tensor main = torch::randn({72, 40}, o.dtype(torch::kFloat32));
    const torch::Tensor start = main.clone();
    ASSERT_TRUE(ops::accumulate_weight_grad_cuda(main, dy, x));
    ASSERT_TRUE(ops::accumulate_weight_grad_cuda(main, dy, x));
    const torch::Tensor ref = start + 2 * torch::mm(dy.to(torch::kFloat32).t(), x.to(torch::kFloat32));
    EXPECT_LT(rel(main, ref), 1e-5) << c10::toString(dtype);  // fp32 accumulation of exact half products
    // First write (beta 0): what main held, NaN included, is not read.
    main.fill_(std::nan(""));
    ASSERT_TRUE(ops::accumulate_weight_grad_cuda(main, dy, x, /*overwrite=*/true));
    EXPECT_LT(rel(main, (ref - start) / 2), 1e-5) << c10::toString(dtype) << " overwrite";
  }
}
#endif  // MEGATON_HAVE_CUDA
