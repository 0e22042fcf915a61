// The FP8 cast kernel and cuBLASLt's FP8 GEMM on the GPU (skipped without a CUDA build and device): the cast's bytes
// are the host's fp8_round of x * scale (decoded code by code), its transpose is the bytes' transpose, its amax is
// max |x|; the GEMM of two cast matrices equals the product of their decoded values times the scale inverses (bf16
// output, or fp32 accumulated into what the output held).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ops/fp8/fp8_format.h"
#ifdef MEGATON_HAVE_CUDA
#include "ops/cublaslt_gemm.h"
#include "ops/fp8/fp8_cast.h"
#include "ops/gelu_bias_grad.h"
#endif

using namespace megaton::ops;

#ifdef MEGATON_HAVE_CUDA
namespace {

// [r, c] fp32 on the host: the decoded values of FP8 bytes.
torch::Tensor decode(const torch::Tensor& bytes, fp8::Format f) {
  torch::Tensor b = bytes.cpu().contiguous();
  torch::Tensor out = torch::empty(b.sizes(), torch::kFloat32);
  const uint8_t* src = b.data_ptr<uint8_t>();
  float* dst = out.data_ptr<float>();
  for (int64_t i = 0; i < b.numel(); ++i) dst[i] = fp8::fp8_decode(src[i], f);
  return out;
}

// x [r, c] bf16 on the GPU with magnitudes over several binades, some beyond the format's range once scaled.
torch::Tensor spread_values(int64_t r, int64_t c, uint64_t seed) {
  torch::manual_seed(seed);
  return (torch::randn({r, c}) * torch::exp2(torch::randint(-6, 6, {r, c}).to(torch::kFloat32)))
      .to(torch::kCUDA, torch::kBFloat16);
}

bool have_gpu() {
  return torch::cuda::is_available();
}

}  // namespace
#endif

TEST(Fp8Gemm, CastMatchesHostRoundingWithTransposeAndAmax) {
#ifdef MEGATON_HAVE_CUDA
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  // 70 x 45: the element-wise kernel (no multiple of anything); 128 x 192: the tiled, vectorised one.
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{70, 45}, {128, 192}})
    for (const fp8::Format f : {fp8::Format::kE4M3, fp8::Format::kE5M2}) {
      const torch::Tensor x = spread_values(rows, cols, 3);
      const float scale = f == fp8::Format::kE4M3 ? 3.0f : 700.0f;
      const auto dev = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat32);
      const torch::Tensor s = torch::full({1}, scale, dev);
      torch::Tensor amax = torch::full({1}, 0.5f, dev);
      const fp8::Fp8Matrix m = fp8::cast_to_fp8(x, s, f, /*transpose=*/true, amax);
      const torch::Tensor got = decode(m.bytes, f);
      const torch::Tensor xf = x.cpu().to(torch::kFloat32);
      const float* xs = xf.data_ptr<float>();
      const float* gs = got.data_ptr<float>();
      int64_t bad = 0;
      for (int64_t i = 0; i < xf.numel(); ++i) bad += gs[i] != fp8::fp8_round(xs[i] * scale, f);
      EXPECT_EQ(bad, 0) << fp8::format_name(f) << " [" << rows << ", " << cols << "]: elements cast unlike fp8_round";
      EXPECT_TRUE(m.bytes_t.cpu().equal(m.bytes.cpu().t().contiguous())) << "the transpose differs";
      EXPECT_EQ(amax.item<float>(), std::max(0.5f, xf.abs().max().item<float>()));
      EXPECT_FLOAT_EQ(m.scale_inv.item<float>(), 1.0f / scale);
    }
#else
  GTEST_SKIP() << "not a CUDA build";
#endif
}

// The fused cast of a gradient (and of the GELU input's gradient) with its bias gradient gives the bytes, transpose
// and amax of the separate kernels bit for bit, and their column sums up to summation order: into an fp32 main grad
// (written over, then added to) or a bf16 vector.
TEST(Fp8Gemm, CastDbiasIsTheGeluBackwardAndBiasGradientThenTheCast) {
#ifdef MEGATON_HAVE_CUDA
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const auto dev = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat32);
  const int64_t rows = 384, cols = 192;
  EXPECT_FALSE(fp8::cast_to_fp8_dbias_supported(spread_values(96, cols, 1))) << "rows not a multiple of 64";
  for (const bool gelu : {false, true})
    for (const fp8::Format f : {fp8::Format::kE4M3, fp8::Format::kE5M2}) {
      SCOPED_TRACE(testing::Message() << "gelu " << gelu << ", " << fp8::format_name(f));
      const torch::Tensor dy = spread_values(rows, cols, 7) * 1e-2;
      const torch::Tensor pre = gelu ? spread_values(rows, cols, 8) : torch::Tensor();
      ASSERT_TRUE(fp8::cast_to_fp8_dbias_supported(dy, pre));
      const torch::Tensor s = torch::full({1}, f == fp8::Format::kE4M3 ? 300.0f : 3000.0f, dev);
      // The separate kernels: d_pre and its bf16 sums, then the cast.
      const auto [g, db_ref] = gelu ? gelu_backward_bias_grad(dy, pre) : std::pair{dy, bias_grad(dy)};
      torch::Tensor amax_ref = torch::full({1}, 1e-6f, dev), amax = torch::full({1}, 1e-6f, dev);
      const fp8::Fp8Matrix want = fp8::cast_to_fp8(g, s, f, true, amax_ref);
      const torch::Tensor sums = g.to(torch::kFloat64).sum(0).cpu();  // [cols]
      // fp32 summation's error scales with the sum of the terms' magnitudes.
      const double norm = g.to(torch::kFloat64).abs().sum(0).max().item<double>();
      // Into a main grad: written over on its first write (what it held is ignored), added to on the next.
      torch::Tensor main = torch::full({cols}, 5.0f, dev), flag = torch::ones({1}, torch::kBool), db;
      const fp8::Fp8Matrix got = fp8::cast_to_fp8_dbias(dy, pre, s, f, amax, true, MainGrad(main, flag), db);
      EXPECT_FALSE(db.defined());
      EXPECT_TRUE(got.bytes.equal(want.bytes)) << "bytes";
      EXPECT_TRUE(got.bytes_t.equal(want.bytes_t)) << "transpose";
      EXPECT_EQ(amax.item<float>(), amax_ref.item<float>());
      EXPECT_GT(amax.item<float>(), 1e-6f);
      EXPECT_LT((main.cpu().to(torch::kFloat64) - sums).abs().max().item<double>(), 1e-5 * norm) << "written over";
      fp8::cast_to_fp8_dbias(dy, pre, s, f, amax, true, MainGrad(main, flag), db);
      EXPECT_LT((main.cpu().to(torch::kFloat64) - 2 * sums).abs().max().item<double>(), 2e-5 * norm) << "added";
      // No main grad: a bf16 vector, as the separate kernel's.
      fp8::cast_to_fp8_dbias(dy, pre, s, f, amax, true, MainGrad(), db);
      ASSERT_TRUE(db.defined());
      EXPECT_LT((db.cpu().to(torch::kFloat64) - db_ref.cpu().to(torch::kFloat64)).abs().max().item<double>(),
                1e-2 * sums.abs().max().item<double>())
          << "bf16 sums";
      // No bias: the cast alone.
      const fp8::Fp8Matrix bare = fp8::cast_to_fp8_dbias(dy, pre, s, f, torch::Tensor(), false, MainGrad(), db);
      EXPECT_FALSE(db.defined());
      EXPECT_TRUE(bare.bytes_t.equal(want.bytes_t));
    }
#else
  GTEST_SKIP() << "not a CUDA build";
#endif
}

// An FP8 output: the bytes are the epilogue's result times the output scale, rounded to FP8 (within one FP8 step of
// the fp64 reference), the amax is that of the result before the scale, the GELU's input is written in 16 bits; and
// the transpose kernel turns the bytes into their transpose, tiled or not.
TEST(Fp8Gemm, Fp8OutputWithGeluEpilogueAndItsTranspose) {
#ifdef MEGATON_HAVE_CUDA
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const int64_t M = 128, K = 256, N = 192;
  const auto dev = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat32);
  const torch::Tensor x = spread_values(M, K, 9) * 0.1, w = spread_values(N, K, 10) * 0.01;
  const torch::Tensor b = spread_values(1, N, 11).reshape({N}) * 0.1;
  const fp8::Fp8Matrix a = fp8::cast_to_fp8(x, torch::full({1}, 8.0f, dev), fp8::Format::kE4M3, false);
  const fp8::Fp8Matrix c = fp8::cast_to_fp8(w, torch::full({1}, 64.0f, dev), fp8::Format::kE4M3, false);
  const torch::Tensor pre_want = torch::mm(decode(a.bytes, a.format).to(torch::kFloat64) / 8.0,
                                           decode(c.bytes, c.format).to(torch::kFloat64).t() / 64.0) +
                                 b.cpu().to(torch::kFloat64);  // [M, N]
  const torch::Tensor act_want = torch::gelu(pre_want, "tanh");
  const float out_scale = 448.0f / act_want.abs().max().item<float>() / 2;
  lt::Fp8Epilogue e;
  e.bias = b;
  e.gelu_pre = torch::empty({M, N}, dev.dtype(torch::kBFloat16));
  e.d_scale = torch::full({1}, out_scale, dev);
  e.d_amax = torch::zeros({1}, dev);
  e.d_format = fp8::Format::kE4M3;
  torch::Tensor d = torch::empty({M, N}, dev.dtype(torch::kUInt8));
  ASSERT_TRUE(
      lt::fp8_gemm({a.bytes, a.scale_inv, a.format}, {c.bytes, c.scale_inv, c.format}, d, false, true, nullptr, e))
      << "no FP8-output algorithm with GELU_AUX_BIAS";
  const double pre_norm = pre_want.abs().max().item<double>();
  EXPECT_LT((e.gelu_pre.cpu().to(torch::kFloat64) - pre_want).abs().max().item<double>(), 2e-2 * pre_norm);
  // E4M3 keeps 3 mantissa bits: a relative step of 1/8 at most, plus the GEMM's rounding.
  const torch::Tensor got = decode(d, fp8::Format::kE4M3).to(torch::kFloat64) / out_scale;
  const double act_norm = act_want.abs().max().item<double>();
  EXPECT_LT(((got - act_want).abs() - act_want.abs() / 8).max().item<double>(), 1e-2 * act_norm);
  EXPECT_NEAR(e.d_amax.item<float>(), act_norm, 2e-2 * act_norm) << "the amax of the unscaled result";
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{128, 192}, {70, 45}}) {
    const torch::Tensor bytes = torch::randint(0, 256, {rows, cols}, dev.dtype(torch::kUInt8));
    EXPECT_TRUE(fp8::transpose_fp8(bytes).equal(bytes.t().contiguous())) << rows << " x " << cols;
  }
#else
  GTEST_SKIP() << "not a CUDA build";
#endif
}

TEST(Fp8Gemm, ProductOfDecodedOperandsTimesScaleInverses) {
#ifdef MEGATON_HAVE_CUDA
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const int64_t M = 256, K = 512, N = 384;
  const auto dev = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat32);
  const torch::Tensor x = spread_values(M, K, 5), w = spread_values(N, K, 6);
  const fp8::Fp8Matrix a = fp8::cast_to_fp8(x, torch::full({1}, 8.0f, dev), fp8::Format::kE4M3, false);
  const fp8::Fp8Matrix b = fp8::cast_to_fp8(w, torch::full({1}, 16.0f, dev), fp8::Format::kE5M2, false);
  // fp64 reference from the decoded operands.
  const torch::Tensor want = torch::mm(decode(a.bytes, a.format).to(torch::kFloat64) / 8.0,
                                       decode(b.bytes, b.format).to(torch::kFloat64).t() / 16.0);  // [M, N]
  const double norm = want.abs().max().item<double>();
  const lt::Fp8Operand oa{a.bytes, a.scale_inv, a.format}, ob{b.bytes, b.scale_inv, b.format};

  torch::Tensor d = torch::empty({M, N}, dev.dtype(torch::kBFloat16));
  ASSERT_TRUE(lt::fp8_gemm(oa, ob, d, /*accumulate=*/false, /*fast_accum=*/false)) << "no FP8 algorithm";
  const double err = (d.cpu().to(torch::kFloat64) - want).abs().max().item<double>();
  EXPECT_LT(err, 1e-2 * norm) << "bf16 output, worst |diff| " << err << " of max " << norm;

  // Added to what the output held: an offset far above the accumulation's rounding would show if it were dropped.
  // Hopper's FP8 tensor cores keep fewer accumulator bits than fp32 (about 1e-4 of the product here, measured).
  torch::Tensor acc = torch::full({M, N}, 0.25 * norm, dev);
  ASSERT_TRUE(lt::fp8_gemm(oa, ob, acc, /*accumulate=*/true, /*fast_accum=*/false));
  const double err32 = (acc.cpu().to(torch::kFloat64) - 0.25 * norm - want).abs().max().item<double>();
  EXPECT_LT(err32, 2e-3 * norm) << "fp32 accumulation, worst |diff| " << err32 << " of max " << norm;

  // E5M2 x E5M2 has no Hopper kernel: refused without touching the output.
  const lt::Fp8Operand ob2{b.bytes, b.scale_inv, fp8::Format::kE5M2};
  const lt::Fp8Operand oa2{a.bytes, a.scale_inv, fp8::Format::kE5M2};
  EXPECT_FALSE(lt::fp8_gemm(oa2, ob2, d, false, false));
#else
  GTEST_SKIP() << "not a CUDA build";
#endif
}
