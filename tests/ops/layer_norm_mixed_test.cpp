// --fp32-residual-connection's fused LayerNorm (kernels/layer_norm_mixed_kernels.cu through ops::layer_norm and
// ops::add_layer_norm): an fp32 residual stream in a bf16/fp16 model against ATen's mixed path (upcast weights,
// fp32 LayerNorm, output in the weight's type; the add promoted to fp32). The plain LayerNorm of an fp32 x and the add
// of a 16-bit branch to an fp32 residual, forward and every gradient, over widths that take each kernel instance (1-4
// vectors per thread, a warp or a group of warps per row); the hidden dropout in the add (sum bit-equal to r +
// round(x keep / (1 - p)), the one-type kernel's mask for the same generator state, the branch's gradient through the
// bits); the main grads; bad arguments; and a tiny GPT with the flag, fused against ATen's LayerNorm. Skipped without
// CUDA (CPU builds and machines); run on the GPU machine by the lead.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "ops/layer_norm.h"
#include "ops/layer_norm_cuda.h"  // declares the fused path in CUDA builds only
#ifdef MEGATON_HAVE_CUDA
#include <c10/cuda/CUDAStream.h>

#include <cmath>

#include "dist/self_communicator.h"
#include "layer_norm_mixed_kernels.h"
#include "model/gpt_stage.h"
#include "model/model_test_util.h"
#include "parallel/rng_tracker.h"
#endif

using namespace megaton;

namespace {

constexpr double kEps = 1e-5;

bool skip() {
#ifndef MEGATON_HAVE_CUDA
  return true;  // not a CUDA build: ops::layer_norm has no fused path
#else
  return !torch::cuda::is_available();
#endif
}

// |got - ref| <= atol + rtol |ref| elementwise; the message names the worst element.
testing::AssertionResult close(const std::string& what, const torch::Tensor& got_in, const torch::Tensor& ref_in,
                               double atol, double rtol) {
  const torch::Tensor got = got_in.to(torch::kFloat64).reshape({-1}), ref = ref_in.to(torch::kFloat64).reshape({-1});
  if (got.numel() != ref.numel())
    return testing::AssertionFailure() << what << ": " << got.numel() << " elements, expected " << ref.numel();
  const torch::Tensor diff = (got - ref).abs(), excess = diff / (atol + rtol * ref.abs());
  const int64_t i = excess.argmax().item<int64_t>();
  if (!got.isfinite().all().item<bool>() || excess[i].item<double>() > 1.0)
    return testing::AssertionFailure() << what << ": max |diff| " << diff.max().item<double>() << "; worst element "
                                       << i << " fused " << got[i].item<double>() << " aten " << ref[i].item<double>();
  return testing::AssertionSuccess();
}

// ||got - ref|| / ||ref|| < tol (the sums over rows: dweight, dbias).
testing::AssertionResult close_norm(const std::string& what, const torch::Tensor& got_in, const torch::Tensor& ref_in,
                                    double tol) {
  const torch::Tensor got = got_in.to(torch::kFloat64), ref = ref_in.to(torch::kFloat64);
  const double err = (got - ref).norm().item<double>() / std::max(ref.norm().item<double>(), 1e-30);
  if (!(err < tol)) return testing::AssertionFailure() << what << ": relative norm error " << err << " >= " << tol;
  return testing::AssertionSuccess();
}

// The widths and row counts that take every instance: forward a warp per row (h <= 1024, 1-3 vectors per lane) or a
// group (2-4 vectors per thread); backward a warp (h <= 256) or a group, 1-4 vectors per thread.
const std::vector<std::vector<int64_t>>& shapes() {
  static const std::vector<std::vector<int64_t>> s{{3, 8},       {37, 256},  {512, 4, 768}, {256, 2, 2048},
                                                   {7, 1, 5120}, {5, 12288}, {3, 16384},    {64, 1000}};
  return s;
}

struct Inputs {
  torch::Tensor x32, x16, r, w, b, dy, dsum;  // fp32 stream, 16-bit branch, fp32 residual; w, b, dy 16-bit; dsum fp32
};

Inputs make_inputs(torch::ScalarType dtype, const std::vector<int64_t>& shape) {
  const int64_t h = shape.back();
  auto f32 = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat32);
  std::vector<int64_t> per_row(shape.size(), 1);
  per_row[0] = shape[0];
  // Rows with a mean away from 0 and a spread per row; the fp32 stream holds values bf16 cannot.
  const torch::Tensor x = (torch::randn(shape, f32) * 2 + 0.5) * (torch::rand(per_row, f32) + 0.5);
  return {x,
          torch::randn(shape, f32).to(dtype),
          x * 0.75 + 0.1,
          (1 + 0.2 * torch::randn({h}, f32)).to(dtype),
          (0.1 * torch::randn({h}, f32)).to(dtype),
          torch::randn(shape, f32).to(dtype),
          torch::randn(shape, f32)};
}

std::string describe(torch::ScalarType dtype, const std::vector<int64_t>& shape) {
  std::string s = std::string(c10::toString(dtype)) + " [";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

bool ran_fused(const torch::Tensor& y) {
  return y.grad_fn() && y.grad_fn()->name().find("Fused") != std::string::npos;
}

}  // namespace

// The first layer's LayerNorm: an fp32 x with 16-bit weight and bias gives y in the weight's type; dx fp32.
TEST(KernelsLayerNormMixed, PlainMatchesAten) {
  if (skip()) GTEST_SKIP() << "no CUDA device or not a CUDA build";
  for (auto dtype : {torch::kBFloat16, torch::kFloat16}) {
    for (const auto& shape : shapes()) {
      torch::manual_seed(31 + shape.back());
      const std::string where = describe(dtype, shape) + " plain";
      const Inputs in = make_inputs(dtype, shape);
      auto run = [&](bool fused) {
        torch::Tensor x = in.x32.detach().requires_grad_(true);
        torch::Tensor w = in.w.detach().requires_grad_(true), b = in.b.detach().requires_grad_(true);
        const torch::Tensor y = ops::layer_norm(x, w, b, kEps, fused);
        const bool f = ran_fused(y);
        y.backward(in.dy);
        return std::make_pair(f, std::vector<torch::Tensor>{y.detach(), x.grad(), w.grad(), b.grad()});
      };
      const auto [fused, got] = run(true);
      const auto [aten, ref] = run(false);
      ASSERT_TRUE(fused) << where << ": the fused path did not run";
      ASSERT_FALSE(aten) << where;
      ASSERT_EQ(got[0].scalar_type(), dtype) << where;
      ASSERT_EQ(got[1].scalar_type(), torch::kFloat32) << where;
      EXPECT_TRUE(close(where + " y", got[0], ref[0], 2e-2, 1e-2));
      EXPECT_TRUE(close(where + " dx", got[1], ref[1], 1e-5, 1e-5));
      EXPECT_TRUE(close_norm(where + " dweight", got[2], ref[2], 1e-2));
      EXPECT_TRUE(close_norm(where + " dbias", got[3], ref[3], 1e-2));
    }
  }
}

// The later LayerNorms: sum = r + x (fp32, bit-equal to ATen's promoted add), y in the weight's type; the residual's
// gradient fp32, the branch's its 16-bit rounding (what autograd's cast gives).
TEST(KernelsLayerNormMixed, AddMatchesAten) {
  if (skip()) GTEST_SKIP() << "no CUDA device or not a CUDA build";
  for (auto dtype : {torch::kBFloat16, torch::kFloat16}) {
    for (const auto& shape : shapes()) {
      torch::manual_seed(41 + shape.back());
      const std::string where = describe(dtype, shape) + " add";
      const Inputs in = make_inputs(dtype, shape);
      auto run = [&](bool fused) {
        torch::Tensor x = in.x16.detach().requires_grad_(true), r = in.r.detach().requires_grad_(true);
        torch::Tensor w = in.w.detach().requires_grad_(true), b = in.b.detach().requires_grad_(true);
        const ops::AddLayerNorm out = ops::add_layer_norm(x, r, w, b, kEps, fused);
        const bool f = ran_fused(out.y);
        torch::autograd::backward({out.sum, out.y}, {in.dsum, in.dy});
        return std::make_pair(
            f, std::vector<torch::Tensor>{out.sum.detach(), out.y.detach(), x.grad(), r.grad(), w.grad(), b.grad()});
      };
      const auto [fused, got] = run(true);
      const auto [aten, ref] = run(false);
      ASSERT_TRUE(fused) << where << ": the fused add did not run";
      ASSERT_FALSE(aten) << where;
      ASSERT_EQ(got[0].scalar_type(), torch::kFloat32) << where;
      ASSERT_EQ(got[1].scalar_type(), dtype) << where;
      ASSERT_EQ(got[2].scalar_type(), dtype) << where;
      ASSERT_EQ(got[3].scalar_type(), torch::kFloat32) << where;
      EXPECT_TRUE(torch::equal(got[0], ref[0])) << where << ": sum differs from ATen's r + x";
      EXPECT_TRUE(close(where + " y", got[1], ref[1], 2e-2, 1e-2));
      EXPECT_TRUE(close(where + " dr", got[3], ref[3], 1e-5, 1e-5));
      EXPECT_TRUE(torch::equal(got[2], got[3].to(dtype))) << where << ": dx is not dr rounded to " << dtype;
      EXPECT_TRUE(close(where + " dx", got[2], ref[2], 2e-2, 1e-2));
      EXPECT_TRUE(close_norm(where + " dweight", got[4], ref[4], 1e-2));
      EXPECT_TRUE(close_norm(where + " dbias", got[5], ref[5], 1e-2));
    }
  }
}

#ifdef MEGATON_HAVE_CUDA
namespace {

// keep [rows * h / 8] uint8 (bit e % 8 of byte e / 8) -> [rows * h] fp32 0/1.
torch::Tensor unpack_keep(const torch::Tensor& keep) {
  const torch::Tensor bits = torch::arange(8, keep.options().dtype(torch::kInt32));
  return keep.to(torch::kInt32).unsqueeze(1).bitwise_right_shift(bits).bitwise_and(1).reshape({-1}).to(torch::kFloat32);
}

}  // namespace

// The hidden dropout drawn in the mixed add: sum bit-equal to r + round(x keep / (1 - p)); the same keep bits as the
// one-type kernel draws from the same generator state; the branch's gradient round(round(dsum) keep / (1 - p)) bit
// for bit, the residual's as without dropout on the same dropped-out x.
TEST(KernelsLayerNormMixed, DropoutInTheAdd) {
  if (skip()) GTEST_SKIP() << "no CUDA device or not a CUDA build";
  constexpr double p = 0.1;
  for (const auto& shape : {std::vector<int64_t>{512, 4, 768}, std::vector<int64_t>{64, 2, 2048}}) {
    const auto dtype = torch::kBFloat16;
    const std::string where = describe(dtype, shape) + " dropout";
    torch::manual_seed(53);
    const Inputs in = make_inputs(dtype, shape);
    parallel::RngTracker rng(1234, 0, 0, torch::Device(torch::kCUDA, 0));
    const parallel::RngState start = rng.get_state();
    const ops::HiddenDropout d{p, &rng.default_generator(), true};
    const ops::FusedLayerNormOutput out = ops::fused_layer_norm_forward(in.x16, in.w, in.b, kEps, in.r, d);
    ASSERT_TRUE(out.keep.defined()) << where;
    const torch::Tensor keep = unpack_keep(out.keep).view(in.x16.sizes());
    const double kept = keep.mean().item<double>(), n = static_cast<double>(keep.numel());
    EXPECT_NEAR(kept, 1 - p, 5 * std::sqrt(p * (1 - p) / n)) << where;
    const torch::Tensor dropped = (in.x16.to(torch::kFloat32) * (keep * (1.0 / (1.0 - p)))).to(dtype);
    EXPECT_TRUE(torch::equal(out.sum, in.r + dropped.to(torch::kFloat32))) << where << ": sum";
    // The one-type kernel (bf16 residual) draws the same bits from the same state.
    rng.set_state(start);
    const ops::FusedLayerNormOutput one = ops::fused_layer_norm_forward(in.x16, in.w, in.b, kEps, in.r.to(dtype), d);
    EXPECT_TRUE(torch::equal(one.keep, out.keep)) << where << ": the mixed kernel drew another mask";
    // y as the mixed LayerNorm of that sum.
    const ops::FusedLayerNormOutput plain = ops::fused_layer_norm_forward(out.sum, in.w, in.b, kEps);
    EXPECT_TRUE(torch::equal(plain.y, out.y)) << where << ": y differs from the LayerNorm of its sum";
    // Backward through the bits.
    const ops::FusedLayerNormGrads g =
        ops::fused_layer_norm_backward(in.dy, out.sum, in.w, out.mean, out.rstd, in.dsum, {}, out.keep, p);
    const ops::FusedLayerNormGrads g0 =
        ops::fused_layer_norm_backward(in.dy, out.sum, in.w, out.mean, out.rstd, in.dsum);
    EXPECT_TRUE(torch::equal(g.dx, g0.dx)) << where << ": the residual's gradient depends on the dropout";
    EXPECT_TRUE(torch::equal(g0.dx_branch, g0.dx.to(dtype))) << where << ": the branch's gradient without dropout";
    const torch::Tensor want = (g.dx.to(dtype).to(torch::kFloat32) * (keep * (1.0 / (1.0 - p)))).to(dtype);
    EXPECT_TRUE(torch::equal(g.dx_branch, want)) << where << ": the branch's gradient through the keep bits";
    EXPECT_TRUE(torch::equal(g.dweight, g0.dweight) && torch::equal(g.dbias, g0.dbias)) << where;
  }
}

// dgamma and dbeta into fp32 main grads: written while the flag says so, the parameters get no gradient, the sums
// what the returned 16-bit gradients round.
TEST(KernelsLayerNormMixed, GammaBetaIntoMainGrads) {
  if (skip()) GTEST_SKIP() << "no CUDA device or not a CUDA build";
  const Inputs in = make_inputs(torch::kBFloat16, {256, 2, 2048});
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA);
  torch::Tensor main_w = torch::randn({2048}, f32), main_b = torch::randn({2048}, f32);
  torch::Tensor flag_w = torch::ones({1}, torch::kBool), flag_b = torch::zeros({1}, torch::kBool);
  const torch::Tensor old_b = main_b.clone();
  auto run = [&](const ops::LayerNormMainGrads& mg) {
    torch::Tensor x = in.x16.detach().requires_grad_(true), r = in.r.detach().requires_grad_(true);
    torch::Tensor w = in.w.detach().requires_grad_(true), b = in.b.detach().requires_grad_(true);
    const ops::AddLayerNorm out = ops::add_layer_norm(x, r, w, b, kEps, true, mg);
    out.y.backward(in.dy);
    return std::vector<torch::Tensor>{x.grad(), w.grad(), b.grad()};
  };
  const auto ref = run({});
  const auto got = run({{main_w, flag_w}, {main_b, flag_b}});
  EXPECT_TRUE(torch::equal(got[0], ref[0])) << "dx changed";
  EXPECT_FALSE(got[1].defined() || got[2].defined()) << "gradients returned besides the main grads";
  EXPECT_FALSE(flag_w.item<bool>());
  EXPECT_TRUE(torch::equal(main_w.to(torch::kBFloat16), ref[1])) << "dgamma written over the main grad";
  EXPECT_TRUE(close_norm("dbeta added", main_b - old_b, ref[2], 1e-2));
}

TEST(KernelsLayerNormMixed, SupportAndBadArguments) {
  if (skip()) GTEST_SKIP() << "no CUDA device or not a CUDA build";
  const Inputs in = make_inputs(torch::kBFloat16, {16, 768});
  EXPECT_TRUE(ops::fused_layer_norm_supported(in.x32, in.w, in.b));
  EXPECT_FALSE(ops::fused_layer_norm_supported(in.x32, in.w, in.b.to(torch::kFloat16)));  // weight and bias differ
  EXPECT_FALSE(ops::fused_layer_norm_supported(in.x16, in.w.to(torch::kFloat32), in.b.to(torch::kFloat32)));
  EXPECT_TRUE(ops::fused_add_layer_norm_supported(in.x16, in.r, in.w, in.b));
  EXPECT_FALSE(ops::fused_add_layer_norm_supported(in.x16.to(torch::kFloat16), in.r, in.w, in.b));  // x not w's type
  EXPECT_FALSE(ops::fused_add_layer_norm_supported(in.x16, in.r.to(torch::kFloat16), in.w, in.b));
  const auto stream = c10::cuda::getCurrentCUDAStream().stream();
  torch::Tensor y = torch::empty_like(in.x16), mean = torch::empty({16}, in.r.options()),
                rstd = torch::empty_like(mean);
  using kernels::FloatType;
  EXPECT_THROW(kernels::layer_norm_mixed_forward(in.x32.data_ptr(), in.w.data_ptr(), in.b.data_ptr(), y.data_ptr(),
                                                 mean.data_ptr<float>(), rstd.data_ptr<float>(), FloatType::kFloat32,
                                                 16, 768, 1e-5f, stream),
               std::invalid_argument);  // an fp32 model
  EXPECT_THROW(kernels::layer_norm_mixed_forward(in.x32.data_ptr(), in.w.data_ptr(), in.b.data_ptr(), y.data_ptr(),
                                                 mean.data_ptr<float>(), rstd.data_ptr<float>(), FloatType::kBFloat16,
                                                 16, 764, 1e-5f, stream),
               std::invalid_argument);  // h % 8 != 0
  EXPECT_THROW(kernels::layer_norm_mixed_forward(static_cast<char*>(in.x32.data_ptr()) + 4, in.w.data_ptr(),
                                                 in.b.data_ptr(), y.data_ptr(), mean.data_ptr<float>(),
                                                 rstd.data_ptr<float>(), FloatType::kBFloat16, 16, 768, 1e-5f, stream),
               std::invalid_argument);  // misaligned
  EXPECT_THROW(kernels::layer_norm_mixed_forward(in.x16.data_ptr(), in.w.data_ptr(), in.b.data_ptr(), y.data_ptr(),
                                                 mean.data_ptr<float>(), rstd.data_ptr<float>(), FloatType::kBFloat16,
                                                 16, 768, 1e-5f, stream, in.r.data_ptr<float>(), nullptr),
               std::invalid_argument);  // a residual without its sum
  torch::Tensor dx = torch::empty_like(in.x32), ws = torch::empty({2, 4, 768}, in.r.options());
  kernels::MixedBranchGrad no_output;
  no_output.p = 0.1f;
  EXPECT_THROW(kernels::layer_norm_mixed_backward(in.dy.data_ptr(), in.x32.data_ptr<float>(), in.w.data_ptr(),
                                                  mean.data_ptr<float>(), rstd.data_ptr<float>(), dx.data_ptr<float>(),
                                                  {}, {}, ws.data_ptr<float>(), 4, FloatType::kBFloat16, 16, 768,
                                                  stream, nullptr, no_output),
               std::invalid_argument);  // a dropout's gradient with nowhere to go
}

// A tiny bf16 GPT with --fp32-residual-connection on the GPU: the mixed kernels (the default) against ATen's
// LayerNorm (--no-fused-layernorm) give the same loss and gradients to bf16 accuracy, and the flag's stream is fp32.
TEST(KernelsLayerNormMixed, TinyGptMatchesAtenLayerNorm) {
  if (skip()) GTEST_SKIP() << "no CUDA device or not a CUDA build";
  auto groups = dist::single_rank_groups();
  model::GptConfig c = modeltest::tiny_config();
  c.model.num_layers = 3;
  c.dtype = torch::kBFloat16;
  c.device = torch::Device(torch::kCUDA, 0);
  c.model.fp32_residual_connection = true;
  const torch::Tensor ids = modeltest::tokens(2, 8, 100).to(c.device);
  const torch::Tensor labels = modeltest::tokens(2, 8, 100, 1).to(c.device);
  auto run = [&](bool fused) {
    model::GptConfig cf = c;
    cf.kernels.fused_layernorm = fused;
    model::GptStage m(cf, groups);
    const torch::Tensor logits = m.forward(ids);
    const torch::Tensor loss =
        model::GptStage::masked_mean(m.token_losses(logits, labels), torch::ones(labels.sizes(), ids.device()));
    loss.backward();
    std::vector<torch::Tensor> out{loss.detach().to(torch::kFloat32)};
    for (const auto& p : m.params()) out.push_back(p.param.grad().to(torch::kFloat32));
    return out;
  };
  const auto got = run(true), ref = run(false);
  ASSERT_EQ(got.size(), ref.size());
  EXPECT_NEAR(got[0].item<double>(), ref[0].item<double>(), 1e-2 * std::abs(ref[0].item<double>()));
  for (size_t i = 1; i < got.size(); ++i)
    EXPECT_TRUE(close_norm("gradient " + std::to_string(i), got[i], ref[i], 3e-2));
}
#endif
