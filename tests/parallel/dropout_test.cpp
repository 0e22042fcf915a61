// parallel::dropout: inverted dropout drawn from an explicit generator (the fused ATen kernel on CUDA, a composite on
// the CPU). Every element is either dropped (0) or kept and scaled by 1/(1-p), about p of them dropped, the mask is a
// function of the generator's state alone, and the gradient is the same mask and scale.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "parallel/rng_tracker.h"

namespace megaton::parallel {
namespace {

void check_dropout(torch::Device device, torch::ScalarType dtype) {
  const double p = 0.25;
  torch::manual_seed(11);
  // [n] values away from zero, so that a zero in the output can only be a dropped element
  auto x = (torch::rand({1 << 16}) + 0.5).to(device, dtype).requires_grad_(true);
  RngTracker rng(1234, 0, 0, device);
  const auto start = rng.get_state();
  auto y = dropout(x, p, true, rng.default_generator());
  EXPECT_EQ(y.scalar_type(), dtype);
  auto dropped = y.detach().eq(0);
  const double frac = dropped.to(torch::kFloat64).mean().item<double>();
  EXPECT_NEAR(frac, p, 0.01) << "about p of the elements dropped";
  // Kept elements are x * 1/(1 - p), rounded once to the element type.
  auto expect = (x.detach().to(torch::kFloat32) * (1.0 / (1.0 - p))).to(dtype).to(torch::kFloat32);
  auto kept = dropped.logical_not();
  EXPECT_TRUE(torch::equal(y.detach().to(torch::kFloat32).masked_select(kept), expect.masked_select(kept)));
  // The gradient of sum(y * w) is w * mask / (1 - p).
  auto w = torch::randn({1 << 16}).to(device, dtype);
  (y * w).sum().backward();
  auto grad_expect =
      (w.to(torch::kFloat32) * (1.0 / (1.0 - p))).to(dtype).to(torch::kFloat32) * kept.to(torch::kFloat32);
  EXPECT_TRUE(torch::allclose(x.grad().to(torch::kFloat32), grad_expect, 1e-2, 1e-6));
  // The same generator state gives the same mask; the generator advanced; evaluation and p = 0 are the identity.
  auto again = dropout(x.detach(), p, true, rng.default_generator());
  EXPECT_FALSE(torch::equal(again.eq(0), dropped)) << "the generator advanced";
  rng.set_state(start);
  EXPECT_TRUE(torch::equal(dropout(x.detach(), p, true, rng.default_generator()).eq(0), dropped));
  EXPECT_TRUE(torch::equal(dropout(x.detach(), p, false, rng.default_generator()), x.detach()));
  EXPECT_TRUE(torch::equal(dropout(x.detach(), 0.0, true, rng.default_generator()), x.detach()));
}

}  // namespace

TEST(ParallelDropout, KeepsOrDropsAndScalesFromTheGenerator) {
  check_dropout(torch::kCPU, torch::kFloat32);
}

TEST(KernelsDropout, FusedCudaKeepsOrDropsAndScalesFromTheGenerator) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  check_dropout(torch::Device(torch::kCUDA, 0), torch::kBFloat16);
}

}  // namespace megaton::parallel
