// ops::gelu_backward_bias_grad (kernels/gelu_bias_grad_kernels.cu on CUDA bf16/fp16) against ATen's gelu_backward
// (approximate "tanh") + sum(0) on the same inputs.
//   GeluBiasGrad.*         the ATen path (CPU): d_pre is autograd's GELU gradient, db its column sums.
//   KernelsGeluBiasGrad.*  the kernel on CUDA: d_pre within an ulp of ATen's, db to fp32 summation-order rounding,
//                          at every compiled GeluBiasGradTuning;
//                          shapes that are not a multiple of the kernel's tiles, a misaligned input, the fallback;
//                          ops::bias_grad (the column sums alone).
//                          Skipped without CUDA; run on the GPU machine by perf/gpu/run.sh.
#include "ops/gelu_bias_grad.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <utility>

using namespace megaton;

TEST(GeluBiasGrad, AtenPathIsAutogradsGeluGradientAndItsColumnSums) {
  torch::manual_seed(3);
  torch::Tensor pre = torch::randn({37, 24}, torch::kFloat64).requires_grad_();
  torch::Tensor d_act = torch::randn({37, 24}, torch::kFloat64);
  torch::gelu(pre, "tanh").backward(d_act);
  auto [d_pre, db] = ops::gelu_backward_bias_grad(d_act, pre.detach());
  EXPECT_TRUE(torch::allclose(d_pre, pre.grad(), 1e-12, 1e-12));
  EXPECT_TRUE(torch::allclose(db, pre.grad().sum(0), 1e-12, 1e-12));
  EXPECT_EQ(db.sizes(), (std::vector<int64_t>{24}));
}

#ifdef MEGATON_HAVE_CUDA
namespace {

// d_pre bit-equal to ATen's but for rare 1-ulp differences (the compilers may contract the arithmetic differently);
// db within fp32 summation-order rounding of the sum of ATen's d_pre. `tuning`: the kernel's, or null for
// ops::gelu_backward_bias_grad's own path.
void expect_matches_aten(const torch::Tensor& d_act, const torch::Tensor& pre, const std::string& what,
                         const kernels::GeluBiasGradTuning* tuning = nullptr) {
  auto [d_pre, db] =
      tuning ? ops::gelu_backward_bias_grad_fused(d_act, pre, *tuning) : ops::gelu_backward_bias_grad(d_act, pre);
  auto [ref, ref_db] = ops::gelu_backward_bias_grad_aten(d_act, pre);
  ASSERT_EQ(d_pre.sizes(), ref.sizes()) << what;
  ASSERT_EQ(db.sizes(), ref_db.sizes()) << what;
  const double differ = (d_pre != ref).to(torch::kFloat64).mean().item<double>();
  EXPECT_LT(differ, 1e-3) << what << ": fraction of d_pre elements differing from ATen's";
  const double max_rel =
      ((d_pre.to(torch::kFloat32) - ref.to(torch::kFloat32)).abs() / (ref.to(torch::kFloat32).abs() + 1e-6))
          .max()
          .item<double>();
  EXPECT_LT(max_rel, 1.6e-2) << what << ": an element more than one bf16 ulp away";
  const torch::Tensor sum32 = ref.to(torch::kFloat32).sum(0);
  const double err = (db.to(torch::kFloat32) - sum32).norm().item<double>() / sum32.norm().item<double>();
  EXPECT_LT(err, 1e-2) << what << ": db relative error";
  EXPECT_EQ(db.scalar_type(), d_act.scalar_type()) << what;
}

}  // namespace

TEST(KernelsGeluBiasGrad, MatchesAtenInBf16AndFp16) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (torch::ScalarType dtype : {torch::kBFloat16, torch::kFloat16}) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1001, 264}, {8, 8}, {4096, 3072}}) {
      torch::manual_seed(11);
      const auto o = torch::TensorOptions().dtype(dtype).device(torch::kCUDA);
      torch::Tensor pre = torch::randn({rows, cols}, o) * 2, d_act = torch::randn({rows, cols}, o);
      ASSERT_TRUE(ops::gelu_bias_grad_fused_supported(d_act, pre));
      expect_matches_aten(d_act, pre,
                          c10::toString(dtype) + std::string(" ") + std::to_string(rows) + "x" + std::to_string(cols));
    }
  }
}

// Every compiled GeluBiasGradTuning (rows in flight, blocks per SM: different unrolling, partial counts and register
// budgets) on row counts that are not a multiple of a pass; an uncompiled one is refused with a clear error.
TEST(KernelsGeluBiasGrad, EveryTuningMatchesAten) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto o = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1001, 264}, {4099, 3072}}) {
    torch::manual_seed(17);
    torch::Tensor pre = torch::randn({rows, cols}, o) * 2, d_act = torch::randn({rows, cols}, o);
    for (const kernels::GeluBiasGradTuning& t : kernels::gelu_bias_grad_tunings())
      expect_matches_aten(d_act, pre,
                          std::to_string(rows) + "x" + std::to_string(cols) + " rows " +
                              std::to_string(t.rows_in_flight) + " blocks " + std::to_string(t.blocks_per_sm),
                          &t);
  }
  torch::Tensor x = torch::randn({16, 16}, o);
  EXPECT_THROW(ops::gelu_backward_bias_grad_fused(x, x, kernels::GeluBiasGradTuning{3, 7}), std::exception);
}

TEST(KernelsGeluBiasGrad, MisalignedInputIsCopiedAndUnsupportedFallsBack) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto o = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA);
  torch::manual_seed(5);
  // Contiguous but 2 bytes off a 16-byte boundary.
  torch::Tensor big = torch::randn({65 * 32 + 1}, o);
  torch::Tensor pre = big.narrow(0, 1, 65 * 32).view({65, 32}), d_act = torch::randn({65, 32}, o);
  ASSERT_NE(reinterpret_cast<uintptr_t>(pre.data_ptr()) % 16, 0u);
  expect_matches_aten(d_act, pre, "misaligned");
  torch::Tensor odd = torch::randn({9, 12}, o);  // 12 columns: not a multiple of 8
  EXPECT_FALSE(ops::gelu_bias_grad_fused_supported(odd, odd));
  auto [d_pre, db] = ops::gelu_backward_bias_grad(odd, odd);
  auto [ref, ref_db] = ops::gelu_backward_bias_grad_aten(odd, odd);
  EXPECT_TRUE(torch::equal(d_pre, ref));
  EXPECT_TRUE(torch::equal(db, ref_db));
}
// ops::bias_grad: the column sums alone (a linear layer's bias gradient) against the fp32 sum of the same values, for
// row counts that are not a multiple of the kernel's 8 x 8 rows per pass, and the ATen fallback bit for bit.
TEST(KernelsGeluBiasGrad, BiasGradMatchesColumnSums) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (torch::ScalarType dtype : {torch::kBFloat16, torch::kFloat16}) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1001, 264}, {1, 8}, {16384, 2304}}) {
      torch::manual_seed(13);
      const auto o = torch::TensorOptions().dtype(dtype).device(torch::kCUDA);
      torch::Tensor dy = torch::randn({rows, cols}, o) + 0.25;  // column sums away from 0
      ASSERT_TRUE(ops::gelu_bias_grad_fused_supported(dy, dy));
      const std::string what =
          c10::toString(dtype) + std::string(" ") + std::to_string(rows) + "x" + std::to_string(cols);
      const torch::Tensor db = ops::bias_grad(dy), ref = dy.to(torch::kFloat32).sum(0);
      ASSERT_EQ(db.sizes(), ref.sizes()) << what;
      EXPECT_EQ(db.scalar_type(), dtype) << what;
      // Both round an fp32 sum to 16 bits: within 1 ulp of bf16 (2^-8 relative) plus summation order.
      const double max_rel =
          ((db.to(torch::kFloat32) - ref).abs() / (ref.abs() + 1e-3 * std::sqrt(double(rows)))).max().item<double>();
      EXPECT_LT(max_rel, 8e-3) << what;
    }
  }
  const auto o = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA);
  torch::Tensor odd = torch::randn({9, 12}, o);  // 12 columns: ATen's sum
  EXPECT_TRUE(torch::equal(ops::bias_grad(odd), odd.sum(0)));
}

// Gradient accumulation fusion for biases: with a main grad the column sums go into it in fp32 (written over it while
// its overwrite flag is set, which they clear; added after) and nothing is returned; the same sums the returned
// bias gradient rounds to 16 bits. A main grad the kernel cannot take (fp64) is left alone and db returned.
TEST(KernelsGeluBiasGrad, SumsIntoTheMainGrad) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(17);
  const auto o = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA);
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA);
  const int64_t rows = 1001, cols = 264;
  const torch::Tensor dy = torch::randn({rows, cols}, o) + 0.25, pre = torch::randn({rows, cols}, o);
  const torch::Tensor old = torch::randn({cols}, f32);
  for (int which = 0; which < 3; ++which) {  // bias_grad, the GELU kernel, the QKV interleave
    const std::string what = "kernel " + std::to_string(which);
    torch::Tensor ref;  // the 16-bit gradient the op returns without a main grad
    auto run = [&](const ops::MainGrad& m) {
      if (which == 0) return ops::bias_grad(dy, m);
      if (which == 1) return ops::gelu_backward_bias_grad(dy, pre, m).second;
      const torch::Tensor q = dy.view({rows, 11, 24}).narrow(2, 0, 8).contiguous();  // [rows, 11, 8]
      return ops::qkv_interleave_bias_grad_fused(q, q * 2, q * 3, m).second;
    };
    ref = run({});
    ASSERT_TRUE(ref.defined()) << what;
    const int64_t n = ref.numel();
    torch::Tensor main = old.narrow(0, 0, n).clone(), flag = torch::ones({1}, torch::kBool);
    EXPECT_FALSE(run({main, flag}).defined()) << what;  // first write: overwrites
    EXPECT_FALSE(flag.item<bool>()) << what;
    const torch::Tensor sums = main.clone();
    EXPECT_LT((sums - ref.to(torch::kFloat32)).abs().max().item<double>(),
              8e-3 * ref.to(torch::kFloat32).abs().max().item<double>())
        << what << ": the fp32 sums are not what the bf16 gradient rounds";
    EXPECT_FALSE(run({main, flag}).defined()) << what;  // then adds
    EXPECT_TRUE(torch::allclose(main, 2 * sums, 1e-6, 1e-6)) << what;
    torch::Tensor main64 = torch::zeros({n}, f32.dtype(torch::kFloat64));
    EXPECT_TRUE(run({main64, torch::ones({1}, torch::kBool)}).defined()) << what;
    EXPECT_EQ(main64.abs().max().item<double>(), 0.0) << what;
  }
}

#endif  // MEGATON_HAVE_CUDA
