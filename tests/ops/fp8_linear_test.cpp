// The FP8 linear layer against the recipe written out here on the host: each GEMM's operands are the FP8 roundings of
// x, w and dy under their slots' scales (E4M3, and E5M2 for dy under hybrid), the weight gradient goes into the fp32
// main grad (written on an iteration's first micro-batch, added after), the amaxes land in the table, the delayed
// recipe's next scales follow from them, and --no-fp8-wgrad computes the weight gradient from the 16-bit operands. On
// a GPU (skipped without one) the CUDA path matches this CPU emulation up to the GEMMs' rounding.
#include "ops/fp8/fp8_linear.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"

using namespace megaton::ops;
using fp8::Format;

namespace {

fp8::Fp8Options hybrid(bool wgrad = true) {
  fp8::Fp8Options o;
  o.format = "hybrid";
  o.wgrad = wgrad;
  return o;
}

torch::Tensor qdq(const torch::Tensor& t, const fp8::ScalingTable& table, int slot) {
  return fp8::quantize_dequantize(t, table.scale()[slot].item<float>(), table.format(slot));
}

struct Case {
  torch::Tensor x, w, b, dy;  // [T, in], [out, in], [out], [T, out]
  Case(torch::Device dev, torch::ScalarType dtype, uint64_t seed, int64_t tokens = 32) {
    torch::manual_seed(seed);
    const auto o = torch::TensorOptions().dtype(dtype);
    x = (torch::randn({tokens, 48}) * 3).to(o).to(dev).requires_grad_();
    w = (torch::randn({64, 48}) * 0.05).to(o).to(dev).requires_grad_();
    b = (torch::randn({64}) * 0.1).to(o).to(dev).requires_grad_();
    dy = (torch::randn({tokens, 64}) * 1e-3).to(o).to(dev);
  }
};

}  // namespace

TEST(Fp8Linear, CpuMatchesTheRecipeWrittenOut) {
  fp8::ScalingTable table(hybrid(), torch::kCPU);
  const fp8::Fp8LinearSlots slots = fp8::register_fp8_linear(table, "layers.0.mlp.fc1.weight");
  EXPECT_EQ(table.format(slots.grad_output), Format::kE5M2);
  // Scales away from 1: one iteration's amaxes recorded and applied.
  table.record_amax(slots.input, torch::tensor(9.0f));
  table.record_amax(slots.weight, torch::tensor(0.2f));
  table.record_amax(slots.grad_output, torch::tensor(4e-3f));
  table.update();
  Case c(torch::kCPU, torch::kBFloat16, 1);
  torch::Tensor main = torch::full({64, 48}, 7.0f), overwrite = torch::ones({1}, torch::kBool);
  const MainGrad mg(main, overwrite);
  for (int mb = 0; mb < 2; ++mb) {
    const torch::Tensor y = fp8::fp8_linear(c.x, c.w, c.b, mg, slots);
    const torch::Tensor want_y =
        (torch::mm(qdq(c.x, table, slots.input), qdq(c.w, table, slots.weight).t()).to(torch::kBFloat16) + c.b)
            .detach();
    EXPECT_TRUE(y.detach().equal(want_y)) << "forward, micro-batch " << mb;
    c.x.mutable_grad().reset();
    y.backward(c.dy);
    const torch::Tensor gq = qdq(c.dy, table, slots.grad_output);
    EXPECT_TRUE(c.x.grad().equal(torch::mm(gq, qdq(c.w, table, slots.weight)).to(torch::kBFloat16))) << "dgrad";
    EXPECT_FALSE(c.w.grad().defined()) << "the weight's gradient goes into its main grad";
    EXPECT_TRUE(c.b.grad().defined());
  }
  const torch::Tensor one = torch::mm(qdq(c.dy, table, slots.grad_output).t(), qdq(c.x, table, slots.input));
  EXPECT_TRUE(torch::allclose(main, 2 * one, 1e-6, 1e-9)) << "first micro-batch writes, the second adds";
  EXPECT_FALSE(overwrite.item<bool>());
  // The amaxes of this iteration, and the delayed recipe's next scales from them.
  const torch::Tensor row = table.amax_history()[0];
  EXPECT_EQ(row[slots.input].item<float>(), c.x.detach().abs().max().to(torch::kFloat32).item<float>());
  EXPECT_EQ(row[slots.weight].item<float>(), c.w.detach().abs().max().to(torch::kFloat32).item<float>());
  EXPECT_EQ(row[slots.grad_output].item<float>(), c.dy.abs().max().to(torch::kFloat32).item<float>());
  table.update();
  EXPECT_FLOAT_EQ(table.scale()[slots.grad_output].item<float>(),
                  57344.0f / c.dy.abs().max().to(torch::kFloat32).item<float>());
}

TEST(Fp8Linear, WithoutFp8WgradTheWeightGradientIsTheSixteenBitProduct) {
  fp8::ScalingTable table(hybrid(/*wgrad=*/false), torch::kCPU);
  const fp8::Fp8LinearSlots slots = fp8::register_fp8_linear(table, "w");
  Case c(torch::kCPU, torch::kFloat32, 2);
  fp8::fp8_linear(c.x, c.w, c.b, {}, slots).backward(c.dy);
  EXPECT_TRUE(torch::allclose(c.w.grad(), torch::mm(c.dy.t(), c.x.detach()), 1e-6, 1e-9));
}

TEST(Fp8Linear, TensorwiseScalesEachCastFromItsOwnAmax) {
  fp8::Fp8Options o = hybrid();
  o.recipe = "tensorwise";
  fp8::ScalingTable table(o, torch::kCPU);
  const fp8::Fp8LinearSlots slots = fp8::register_fp8_linear(table, "w");
  Case c(torch::kCPU, torch::kFloat32, 3);
  const torch::Tensor y = fp8::fp8_linear(c.x, c.w, {}, {}, slots);
  const float sx = 448.0f / c.x.detach().abs().max().item<float>(),
              sw = 448.0f / c.w.detach().abs().max().item<float>();
  const torch::Tensor want =
      torch::mm(fp8::quantize_dequantize(c.x, sx, Format::kE4M3), fp8::quantize_dequantize(c.w, sw, Format::kE4M3).t());
  EXPECT_TRUE(y.detach().equal(want));
}

TEST(Fp8Linear, ShapesNotDivisibleBy16AreRefused) {
  fp8::ScalingTable table(hybrid(), torch::kCPU);
  const fp8::Fp8LinearSlots slots = fp8::register_fp8_linear(table, "w");
  const torch::Tensor x = torch::randn({4, 40}), w = torch::randn({64, 40}).requires_grad_();
  EXPECT_THROW(fp8::fp8_linear(x, w, {}, {}, slots), megaton::UsageError);
}

TEST(Fp8Linear, CudaMatchesCpuEmulation) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  fp8::ScalingTable cpu_table(hybrid(), torch::kCPU), gpu_table(hybrid(), torch::kCUDA);
  const auto cs = fp8::register_fp8_linear(cpu_table, "w"), gs = fp8::register_fp8_linear(gpu_table, "w");
  for (auto* t : {&cpu_table, &gpu_table}) {
    t->record_amax(0, torch::tensor(9.0f).to(t->scale().device()));
    t->record_amax(1, torch::tensor(0.2f).to(t->scale().device()));
    t->record_amax(2, torch::tensor(4e-3f).to(t->scale().device()));
    t->update();
  }
  Case cc(torch::kCPU, torch::kBFloat16, 4), gc(torch::kCUDA, torch::kBFloat16, 4);
  torch::Tensor cm = torch::zeros({64, 48}), gm = torch::zeros({64, 48}, torch::TensorOptions().device(torch::kCUDA));
  const torch::Tensor cy = fp8::fp8_linear(cc.x, cc.w, cc.b, MainGrad(cm), cs);
  const torch::Tensor gy = fp8::fp8_linear(gc.x, gc.w, gc.b, MainGrad(gm), gs);
  const auto rel = [](const torch::Tensor& got, const torch::Tensor& want) {
    return ((got.detach().cpu().to(torch::kFloat64) - want.detach().to(torch::kFloat64)).abs().max() /
            want.detach().to(torch::kFloat64).abs().max())
        .item<double>();
  };
  EXPECT_LT(rel(gy, cy), 1e-2) << "forward";
  cy.backward(cc.dy);
  gy.backward(gc.dy);
  EXPECT_LT(rel(gc.x.grad(), cc.x.grad()), 1e-2) << "dgrad";
  EXPECT_LT(rel(gm, cm), 1e-4) << "wgrad into the fp32 main grad";
  EXPECT_TRUE(gpu_table.amax_history().cpu().equal(cpu_table.amax_history())) << "amaxes";
}

// fc1 with its GELU: the forward is gelu_tanh of fp8_linear's output, and the backward the FP8 GEMMs of the GELU
// input's gradient (with the bias's gradient summed from it), as autograd through the two functions gives them.
TEST(Fp8Linear, GeluVariantIsTheGeluOfTheLinear) {
  fp8::ScalingTable fused_table(hybrid(), torch::kCPU), plain_table(hybrid(), torch::kCPU);
  const auto fs = fp8::register_fp8_linear(fused_table, "w"), ps = fp8::register_fp8_linear(plain_table, "w");
  Case f(torch::kCPU, torch::kBFloat16, 5), p(torch::kCPU, torch::kBFloat16, 5);
  torch::Tensor fm = torch::zeros({64, 48}), pm = torch::zeros({64, 48});
  const torch::Tensor fy = fp8::fp8_linear_gelu(f.x, f.w, f.b, MainGrad(fm), fs);
  const torch::Tensor py = torch::gelu(fp8::fp8_linear(p.x, p.w, p.b, MainGrad(pm), ps), "tanh");
  EXPECT_TRUE(fy.detach().equal(py.detach())) << "forward";
  fy.backward(f.dy * 100);
  py.backward(p.dy * 100);
  EXPECT_TRUE(f.x.grad().equal(p.x.grad())) << "dgrad";
  EXPECT_TRUE(f.b.grad().equal(p.b.grad())) << "bias gradient";
  EXPECT_TRUE(fm.equal(pm)) << "wgrad";
  EXPECT_GT(fm.abs().max().item<float>(), 0.0f);
  EXPECT_TRUE(fused_table.amax_history().equal(plain_table.amax_history())) << "amaxes";
}

// On a GPU: the bias (and the GELU) in the forward GEMM's epilogue, the bias gradient into its fp32 main grad, against
// the CPU emulation (32 tokens: the backward's separate bias-gradient and GELU kernel and cast).
TEST(Fp8Linear, CudaEpiloguesMatchCpuEmulation) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const int64_t tokens = 32;
  for (const bool gelu : {false, true}) {
    fp8::ScalingTable cpu_table(hybrid(), torch::kCPU), gpu_table(hybrid(), torch::kCUDA);
    const auto cs = fp8::register_fp8_linear(cpu_table, "w"), gs = fp8::register_fp8_linear(gpu_table, "w");
    for (auto* t : {&cpu_table, &gpu_table}) {
      t->record_amax(0, torch::tensor(9.0f).to(t->scale().device()));
      t->record_amax(1, torch::tensor(0.2f).to(t->scale().device()));
      t->record_amax(2, torch::tensor(0.4f).to(t->scale().device()));
      t->update();
    }
    Case cc(torch::kCPU, torch::kBFloat16, 6, tokens), gc(torch::kCUDA, torch::kBFloat16, 6, tokens);
    const auto cuda = torch::TensorOptions().device(torch::kCUDA);
    torch::Tensor cm = torch::zeros({64, 48}), gm = torch::zeros({64, 48}, cuda);
    torch::Tensor gbm = torch::zeros({64}, cuda), gbo = torch::ones({1}, torch::kBool);
    const auto run = [&](Case& c, torch::Tensor& m, const fp8::Fp8LinearSlots& s, const MainGrad& bm) {
      return gelu ? fp8::fp8_linear_gelu(c.x, c.w, c.b, MainGrad(m), s, bm)
                  : fp8::fp8_linear(c.x, c.w, c.b, MainGrad(m), s, bm);
    };
    const torch::Tensor cy = run(cc, cm, cs, {}), gy = run(gc, gm, gs, MainGrad(gbm, gbo));
    const auto rel = [](const torch::Tensor& got, const torch::Tensor& want) {
      return ((got.detach().cpu().to(torch::kFloat64) - want.detach().to(torch::kFloat64)).abs().max() /
              want.detach().to(torch::kFloat64).abs().max())
          .item<double>();
    };
    EXPECT_LT(rel(gy, cy), 1e-2) << "forward, gelu " << gelu;
    cy.backward(cc.dy * 100);
    gy.backward(gc.dy * 100);
    EXPECT_LT(rel(gc.x.grad(), cc.x.grad()), 2e-2) << "dgrad, gelu " << gelu;
    EXPECT_LT(rel(gm, cm), 1e-2) << "wgrad, gelu " << gelu;
    EXPECT_LT(rel(gbm, cc.b.grad()), 1e-2) << "bias gradient into its main grad, gelu " << gelu;
    EXPECT_FALSE(gc.b.grad().defined()) << "the bias's gradient went into its main grad";
    EXPECT_LT(rel(gpu_table.amax_history()[0], cpu_table.amax_history()[0]), 2e-2) << "amaxes";
  }
}

// On a GPU with 128 tokens (multiples of 64): the backward's fused cast_to_fp8_dbias (the output gradient's cast, the
// bias gradient and the GELU's derivative in one pass) gives the separate kernels' results (--no-fp8-cast-fusion):
// the same dgrad, wgrad and amaxes bit for bit (the GEMMs read the same bytes), the bias gradient to summation order.
TEST(Fp8Linear, CudaFusedCastsMatchSeparateKernels) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (const bool gelu : {false, true}) {
    SCOPED_TRACE(testing::Message() << "gelu " << gelu);
    fp8::Fp8Options unfused_options = hybrid();
    unfused_options.fused_casts = false;
    fp8::ScalingTable fused_table(hybrid(), torch::kCUDA), plain_table(unfused_options, torch::kCUDA);
    const auto fs = fp8::register_fp8_linear(fused_table, "w"), ps = fp8::register_fp8_linear(plain_table, "w");
    for (auto* t : {&fused_table, &plain_table}) {
      t->record_amax(0, torch::tensor(9.0f).cuda());
      t->record_amax(1, torch::tensor(0.2f).cuda());
      t->record_amax(2, torch::tensor(0.4f).cuda());
      t->update();
    }
    Case f(torch::kCUDA, torch::kBFloat16, 7, 128), p(torch::kCUDA, torch::kBFloat16, 7, 128);
    const auto cuda = torch::TensorOptions().device(torch::kCUDA);
    torch::Tensor fm = torch::zeros({64, 48}, cuda), pm = torch::zeros({64, 48}, cuda);
    torch::Tensor fbm = torch::zeros({64}, cuda), pbm = torch::zeros({64}, cuda);
    const auto run = [&](Case& c, torch::Tensor& m, const fp8::Fp8LinearSlots& s, torch::Tensor& bm) {
      const MainGrad b_main(bm, torch::ones({1}, torch::kBool));
      return gelu ? fp8::fp8_linear_gelu(c.x, c.w, c.b, MainGrad(m), s, b_main)
                  : fp8::fp8_linear(c.x, c.w, c.b, MainGrad(m), s, b_main);
    };
    const torch::Tensor fy = run(f, fm, fs, fbm), py = run(p, pm, ps, pbm);
    EXPECT_TRUE(fy.equal(py)) << "forward";
    fy.backward(f.dy * 100);
    py.backward(p.dy * 100);
    EXPECT_TRUE(f.x.grad().equal(p.x.grad())) << "dgrad";
    EXPECT_TRUE(fm.equal(pm)) << "wgrad";
    EXPECT_GT(fm.abs().max().item<float>(), 0.0f);
    const double bias_norm = pbm.abs().max().item<double>();
    EXPECT_GT(bias_norm, 0.0);
    EXPECT_LT((fbm - pbm).abs().max().item<double>(), 1e-5 * bias_norm) << "bias gradient";
    EXPECT_TRUE(fused_table.amax_history().equal(plain_table.amax_history())) << "amaxes";
  }
}
