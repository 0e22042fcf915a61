// The fused FP8 MLP (one autograd function; fc1's GEMM writes the activation as FP8) against the two FP8 layers it
// replaces, fp8_linear_gelu then fp8_linear, on a GPU (skipped without one): the same output, gradients (weights' into
// their main grads, biases' too), amaxes and scales up to the activation's one rounding; and it declines what it does
// not take (the CPU, tensorwise scaling, 16-bit weight gradients, unfused casts).
#include "ops/fp8/fp8_mlp.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

using namespace megaton::ops;

namespace {

fp8::Fp8Options delayed_hybrid() {
  fp8::Fp8Options o;
  o.format = "hybrid";
  o.amax_history_len = 4;
  o.amax_compute_algo = "max";
  return o;
}

// One MLP's tensors and its FP8 state on `dev`: x [T, h], fc1 [f, h] + [f], fc2 [h, f] + [h], fp32 main grads.
struct Mlp {
  fp8::ScalingTable table;
  fp8::Fp8MlpParams p;
  torch::Tensor x, dy, main1, bmain1, main2, bmain2;
  Mlp(const fp8::Fp8Options& o, torch::Device dev, uint64_t seed) : table(o, dev) {
    const int64_t T = 128, h = 64, f = 256;
    torch::manual_seed(seed);
    const auto bf16 = torch::TensorOptions().dtype(torch::kBFloat16);
    const auto fp32 = torch::TensorOptions().device(dev).dtype(torch::kFloat32);
    x = (torch::randn({T, h}) * 2).to(bf16).to(dev).requires_grad_();
    dy = (torch::randn({T, h}) * 1e-3).to(bf16).to(dev);
    p.w1 = (torch::randn({f, h}) * 0.1).to(bf16).to(dev).requires_grad_();
    p.b1 = (torch::randn({f}) * 0.1).to(bf16).to(dev).requires_grad_();
    p.w2 = (torch::randn({h, f}) * 0.05).to(bf16).to(dev).requires_grad_();
    p.b2 = (torch::randn({h}) * 0.1).to(bf16).to(dev).requires_grad_();
    main1 = torch::zeros({f, h}, fp32), bmain1 = torch::zeros({f}, fp32);
    main2 = torch::zeros({h, f}, fp32), bmain2 = torch::zeros({h}, fp32);
    p.w1_main = MainGrad(main1), p.b1_main = MainGrad(bmain1), p.w2_main = MainGrad(main2),
    p.b2_main = MainGrad(bmain2);
    p.fc1 = fp8::register_fp8_linear(table, "fc1.weight");
    p.fc2 = fp8::register_fp8_linear(table, "fc2.weight");
  }
  // An iteration of the plain layers first, so the scales are the data's (not 1) when the one compared runs.
  void warm_up() {
    const torch::Tensor a = fp8::fp8_linear_gelu(x, p.w1, p.b1, {}, p.fc1);
    fp8::fp8_linear(a, p.w2, p.b2, {}, p.fc2).backward(dy);
    table.update();
    for (torch::Tensor* t : {&x, &p.w1, &p.b1, &p.w2, &p.b2}) t->mutable_grad().reset();
  }
};

double rel(const torch::Tensor& got, const torch::Tensor& want) {
  const torch::Tensor g = got.detach().cpu().to(torch::kFloat64), w = want.detach().cpu().to(torch::kFloat64);
  return ((g - w).abs().max() / w.abs().max()).item<double>();
}

}  // namespace

TEST(Fp8Mlp, MatchesTheTwoFp8LayersItFuses) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  Mlp fused(delayed_hybrid(), torch::kCUDA, 3), plain(delayed_hybrid(), torch::kCUDA, 3);
  fused.warm_up();
  plain.warm_up();
  ASSERT_TRUE(fp8::fp8_mlp_supported(fused.x, fused.p));
  const torch::Tensor y = fp8::fp8_mlp(fused.x, fused.p);
  const torch::Tensor a =
      fp8::fp8_linear_gelu(plain.x, plain.p.w1, plain.p.b1, plain.p.w1_main, plain.p.fc1, plain.p.b1_main);
  const torch::Tensor want = fp8::fp8_linear(a, plain.p.w2, plain.p.b2, plain.p.w2_main, plain.p.fc2, plain.p.b2_main);
  EXPECT_LT(rel(y, want), 3e-2) << "output";
  y.backward(fused.dy);
  want.backward(plain.dy);
  EXPECT_LT(rel(fused.x.grad(), plain.x.grad()), 5e-2) << "dgrad";
  EXPECT_LT(rel(fused.main1, plain.main1), 5e-2) << "fc1's wgrad";
  EXPECT_LT(rel(fused.main2, plain.main2), 5e-2) << "fc2's wgrad";
  EXPECT_LT(rel(fused.bmain1, plain.bmain1), 5e-2) << "fc1's bias gradient";
  EXPECT_LT(rel(fused.bmain2, plain.bmain2), 5e-2) << "fc2's bias gradient";
  for (const torch::Tensor* t : {&fused.p.w1, &fused.p.b1, &fused.p.w2, &fused.p.b2})
    EXPECT_FALSE(t->grad().defined()) << "the gradients went into the main grads";
  // Every slot's amax recorded, fc2's input (the activation's, from cuBLASLt) among them.
  const torch::Tensor got_amax = fused.table.amax_history()[0].cpu(), want_amax = plain.table.amax_history()[0].cpu();
  for (int slot = 0; slot < 6; ++slot)
    EXPECT_NEAR(got_amax[slot].item<float>(), want_amax[slot].item<float>(), 2e-2 * want_amax[slot].item<float>())
        << "slot " << slot;
  EXPECT_GT(got_amax[fused.p.fc2.input].item<float>(), 0.0f);
}

TEST(Fp8Mlp, DeclinesWhatItDoesNotTake) {
  Mlp cpu(delayed_hybrid(), torch::kCPU, 1);
  EXPECT_FALSE(fp8::fp8_mlp_supported(cpu.x, cpu.p)) << "the CPU";
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  fp8::Fp8Options tensorwise = delayed_hybrid(), wgrad16 = delayed_hybrid(), unfused = delayed_hybrid();
  tensorwise.recipe = "tensorwise";
  wgrad16.wgrad = false;
  unfused.fused_casts = false;
  for (const fp8::Fp8Options& o : {tensorwise, wgrad16, unfused}) {
    Mlp m(o, torch::kCUDA, 1);
    EXPECT_FALSE(fp8::fp8_mlp_supported(m.x, m.p));
  }
  Mlp no_b1(delayed_hybrid(), torch::kCUDA, 1);
  no_b1.p.b1 = torch::Tensor();
  EXPECT_FALSE(fp8::fp8_mlp_supported(no_b1.x, no_b1.p)) << "fc1 without a bias";
  Mlp ok(delayed_hybrid(), torch::kCUDA, 1);
  EXPECT_TRUE(fp8::fp8_mlp_supported(ok.x, ok.p));
}
