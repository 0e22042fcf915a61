// Megatron's hidden dropout where its branch joins the residual stream: ops::add_layer_norm with a HiddenDropout.
// On the CPU (and wherever the kernels do not take it) ops::dropout runs before the add: the same masks as dropping out
// first from the same generator state. On CUDA in bf16/fp16 with `fused` (--dropout-layernorm-fusion) the draws run in
// the LayerNorm's forward kernel (kernels::ResidualDropout): the sum is the residual plus x * keep / (1 - p) rounded as
// ATen rounds it, about p of the elements dropped, a mask that is a function of the generator state alone, different
// per row, and the backward gives x the residual's gradient through the same keep bits (fused in the backward kernel
// or as a pass of its own: the same bits). The CUDA tests are skipped without a GPU; run on the GPU machine by the
// lead.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "ops/dropout.h"
#include "ops/layer_norm.h"
#include "ops/layer_norm_cuda.h"  // declares the fused path in CUDA builds only
#include "parallel/rng_tracker.h"
#ifdef MEGATON_HAVE_CUDA
#include <c10/cuda/CUDAStream.h>

#include "layer_norm_kernels.h"
#endif

using namespace megaton;

namespace {

constexpr double kEps = 1e-5;

struct Grads {
  torch::Tensor sum, y, dx, dr, dw, db;
  std::string grad_fn;
};

// ops::add_layer_norm(x, r) with `dropout`, then backward of (dsum, dy) into sum and y.
Grads run_add(const torch::Tensor& x0, const torch::Tensor& r0, const torch::Tensor& w0, const torch::Tensor& b0,
              const torch::Tensor& dsum, const torch::Tensor& dy, bool fused_ln, const ops::HiddenDropout& dropout) {
  torch::Tensor x = x0.detach().requires_grad_(true), r = r0.detach().requires_grad_(true);
  torch::Tensor w = w0.detach().requires_grad_(true), b = b0.detach().requires_grad_(true);
  const ops::AddLayerNorm out = ops::add_layer_norm(x, r, w, b, kEps, fused_ln, {}, dropout);
  const std::string name = out.y.grad_fn() ? out.y.grad_fn()->name() : "none";
  torch::autograd::backward({out.sum, out.y}, {dsum, dy});
  return {out.sum.detach(), out.y.detach(), x.grad(), r.grad(), w.grad(), b.grad(), name};
}

}  // namespace

// The composite path: the sum is the residual plus ops::dropout(x) drawn from the same generator state, y its
// LayerNorm, and x's gradient the residual's through the same mask and scale.
TEST(OpsAddLayerNorm, HiddenDropoutBeforeTheAddOnCpu) {
  torch::manual_seed(5);
  const double p = 0.3;
  const torch::Tensor x = torch::rand({64, 2, 48}) + 0.5, r = torch::randn({64, 2, 48});
  const torch::Tensor w = 1 + 0.1 * torch::randn({48}), b = 0.1 * torch::randn({48});
  const torch::Tensor dsum = torch::randn_like(x), dy = torch::randn_like(x);
  parallel::RngTracker rng(77, 0, 0, torch::kCPU);
  const parallel::RngState start = rng.get_state();
  const Grads got = run_add(x, r, w, b, dsum, dy, /*fused_ln=*/true, {p, &rng.default_generator(), /*fused=*/true});
  const parallel::RngState after = rng.get_state();
  EXPECT_FALSE(torch::equal(after.default_state, start.default_state)) << "the generator did not advance";
  rng.set_state(start);
  const torch::Tensor dropped = ops::dropout(x, p, rng.default_generator());
  EXPECT_TRUE(torch::equal(rng.get_state().default_state, after.default_state)) << "a different number of draws";
  const torch::Tensor keep = dropped.ne(0);
  const double frac = 1.0 - keep.to(torch::kFloat64).mean().item<double>();
  EXPECT_NEAR(frac, p, 0.05);
  EXPECT_TRUE(torch::allclose(got.sum, dropped + r)) << "sum is not dropout(x) + residual";
  const Grads ref = run_add(dropped, r, w, b, dsum, dy, true, {});
  EXPECT_TRUE(torch::allclose(got.y, ref.y));
  EXPECT_TRUE(torch::allclose(got.dr, ref.dr));
  EXPECT_TRUE(torch::allclose(got.dx, ref.dr * keep.to(torch::kFloat32) / (1 - p), 1e-5, 1e-6))
      << "x's gradient is not the residual's through the mask";
  // p = 0 and no dropout agree exactly.
  const Grads none = run_add(x, r, w, b, dsum, dy, true, {0.0, &rng.default_generator(), true});
  const Grads plain = run_add(x, r, w, b, dsum, dy, true, {});
  EXPECT_TRUE(torch::equal(none.sum, plain.sum) && torch::equal(none.dx, plain.dx));
}

#ifdef MEGATON_HAVE_CUDA
namespace {

bool no_cuda() {
  return !torch::cuda::is_available();
}

// [rows * h / 8] keep bytes -> [rows * h] bool (bit e % 8 of byte e / 8).
torch::Tensor unpack_keep(const torch::Tensor& keep) {
  const torch::Tensor shifts = torch::arange(8, keep.options().dtype(torch::kInt32));
  return keep.to(torch::kInt32).unsqueeze(-1).bitwise_right_shift(shifts).bitwise_and(1).reshape({-1}).to(torch::kBool);
}

// round(t * keep / (1 - p)) to t's dtype from fp32, as the kernels and ATen's dropout compute it (the kernels take p
// as a float).
torch::Tensor drop_scale(const torch::Tensor& t, const torch::Tensor& keep, double p) {
  const float scale = static_cast<float>(1.0 / (1.0 - static_cast<double>(static_cast<float>(p))));
  return (t.to(torch::kFloat32) * keep.reshape(t.sizes()).to(torch::kFloat32) * scale).to(t.scalar_type());
}

struct Case {
  torch::ScalarType dtype;
  std::vector<int64_t> shape;
};

std::string describe(const Case& c) {
  std::string s = std::string(c10::toString(c.dtype)) + " [";
  for (size_t i = 0; i < c.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(c.shape[i]);
  return s + "]";
}

const std::vector<Case> kCases = {{torch::kBFloat16, {512, 4, 768}},
                                  {torch::kBFloat16, {128, 8, 2048}},
                                  {torch::kFloat16, {96, 2, 1024}},
                                  {torch::kBFloat16, {7, 1, 5120}}};

}  // namespace

// The forward kernel's draws: sum = r + round(x * keep / (1 - p)) bit for bit, y = the fused LayerNorm of that sum,
// about p dropped, rows with masks of their own, the mask a function of the generator state, the generator advanced.
TEST(KernelsDropoutAddLayerNorm, InTheAddKeepsOrDropsAndScales) {
  if (no_cuda()) GTEST_SKIP() << "no CUDA device";
  const double p = 0.1;
  for (const Case& c : kCases) {
    const std::string where = describe(c);
    torch::manual_seed(41 + c.shape.back());
    auto opts = torch::TensorOptions().device(torch::kCUDA).dtype(c.dtype);
    const int64_t h = c.shape.back();
    const torch::Tensor x = torch::rand(c.shape, opts) + 0.5, r = torch::randn(c.shape, opts);  // x away from 0
    const torch::Tensor w = (1 + 0.2 * torch::randn({h}, opts)), b = 0.1 * torch::randn({h}, opts);
    parallel::RngTracker rng(1234, 0, 0, torch::Device(torch::kCUDA, 0));
    const parallel::RngState start = rng.get_state();
    const ops::HiddenDropout d{p, &rng.default_generator(), true};
    const ops::FusedLayerNormOutput out = ops::fused_layer_norm_forward(x, w, b, kEps, r, d);
    ASSERT_TRUE(out.keep.defined()) << where;
    ASSERT_EQ(out.keep.numel(), x.numel() / 8) << where;
    const torch::Tensor keep = unpack_keep(out.keep);
    const double frac = 1.0 - keep.to(torch::kFloat64).mean().item<double>();
    const double sigma = std::sqrt(p * (1 - p) / static_cast<double>(x.numel()));
    EXPECT_NEAR(frac, p, 5 * sigma + 1e-4) << where << ": dropped fraction";
    EXPECT_TRUE(torch::equal(out.sum, drop_scale(x, keep, p) + r)) << where << ": sum is not r + round(x keep / (1-p))";
    const ops::FusedLayerNormOutput ln = ops::fused_layer_norm_forward(out.sum, w, b, kEps);
    EXPECT_TRUE(torch::equal(out.y, ln.y)) << where << ": y is not the LayerNorm of the sum";
    EXPECT_TRUE(torch::equal(out.mean, ln.mean) && torch::equal(out.rstd, ln.rstd)) << where;
    const torch::Tensor rows = keep.reshape({-1, h});
    if (rows.size(0) > 1) {
      EXPECT_FALSE(torch::equal(rows[0], rows[1])) << where << ": two rows drew the same mask";
    }
    // The same state draws the same mask; the generator moved on.
    const ops::FusedLayerNormOutput next = ops::fused_layer_norm_forward(x, w, b, kEps, r, d);
    EXPECT_FALSE(torch::equal(next.keep, out.keep)) << where << ": the generator did not advance";
    rng.set_state(start);
    const ops::FusedLayerNormOutput again = ops::fused_layer_norm_forward(x, w, b, kEps, r, d);
    EXPECT_TRUE(torch::equal(again.keep, out.keep) && torch::equal(again.sum, out.sum)) << where;
  }
}

// Through autograd (ops::add_layer_norm, as the transformer layer calls it): the residual's gradient and the
// LayerNorm's parameter gradients are those of the plain fused add on the dropped-out x, bit for bit, and x's gradient
// is the residual's through the keep bits and scale.
TEST(KernelsDropoutAddLayerNorm, InTheAddBackward) {
  if (no_cuda()) GTEST_SKIP() << "no CUDA device";
  const double p = 0.25;
  for (const Case& c : kCases) {
    const std::string where = describe(c);
    torch::manual_seed(43 + c.shape.back());
    auto opts = torch::TensorOptions().device(torch::kCUDA).dtype(c.dtype);
    const int64_t h = c.shape.back();
    const torch::Tensor x = torch::randn(c.shape, opts), r = torch::randn(c.shape, opts);
    const torch::Tensor w = (1 + 0.2 * torch::randn({h}, opts)), b = 0.1 * torch::randn({h}, opts);
    const torch::Tensor dsum = torch::randn(c.shape, opts), dy = torch::randn(c.shape, opts);
    parallel::RngTracker rng(99, 0, 0, torch::Device(torch::kCUDA, 0));
    const parallel::RngState start = rng.get_state();
    const Grads got = run_add(x, r, w, b, dsum, dy, true, {p, &rng.default_generator(), true});
    ASSERT_NE(got.grad_fn.find("FusedAddLayerNorm"), std::string::npos) << where << ": ran " << got.grad_fn;
    rng.set_state(start);
    const ops::HiddenDropout d{p, &rng.default_generator(), true};
    const torch::Tensor keep = unpack_keep(ops::fused_layer_norm_forward(x, w, b, kEps, r, d).keep);
    const torch::Tensor dropped = drop_scale(x, keep, p);
    EXPECT_TRUE(torch::equal(got.sum, dropped + r)) << where;
    const Grads ref = run_add(dropped, r, w, b, dsum, dy, true, {});
    EXPECT_TRUE(torch::equal(got.dr, ref.dr)) << where << ": the residual's gradient";
    // dgamma / dbeta: sums over the rows, grouped by the backward grid (which the dropout's kernel may size apart)
    EXPECT_TRUE(torch::allclose(got.dw.to(torch::kFloat32), ref.dw.to(torch::kFloat32), 1e-2, 1e-2)) << where;
    EXPECT_TRUE(torch::allclose(got.db.to(torch::kFloat32), ref.db.to(torch::kFloat32), 1e-2, 1e-2)) << where;
    EXPECT_TRUE(torch::equal(got.dx, drop_scale(ref.dr, keep, p))) << where << ": x's gradient";
    // Without `fused` (or with --no-fused-layernorm) the composite runs: ATen's dropout, then the add.
    const Grads composite = run_add(x, r, w, b, dsum, dy, true, {p, &rng.default_generator(), false});
    const double frac = 1.0 - composite.dx.ne(0).to(torch::kFloat64).mean().item<double>();
    EXPECT_NEAR(frac, p, 0.02) << where << ": the composite path's dropped fraction";
  }
}

// The kernels directly, every backward LayerNormTuning a dropout can run (one row per pass; with and without the
// shared-memory ring, early residual or not, warp or group rows) and the dropout's gradient fused in the backward
// kernel or as its own pass: dx_dropout = round(dx * keep / (1 - p)) from the same call's dx, bit for bit, and dx as
// the plain backward's.
TEST(KernelsDropoutAddLayerNorm, GradientEveryTuning) {
  if (no_cuda()) GTEST_SKIP() << "no CUDA device";
  const double p = 0.1;
  const kernels::LayerNormTuning tunings[] = {{},
                                              {0, 8, 1, 256, 512, true, 0},
                                              {0, 8, 1, 256, 512, false, 0},
                                              {0, 8, 1, 256, 512, true, 2},
                                              {16, 16, 2, 256, 256},
                                              {32, 32, 1, 64, 64}};
  for (const Case& c : kCases) {
    torch::manual_seed(47 + c.shape.back());
    auto opts = torch::TensorOptions().device(torch::kCUDA).dtype(c.dtype);
    const int64_t h = c.shape.back(), rows = c.shape[0] * c.shape[1];
    const torch::Tensor x = torch::randn({rows, h}, opts), r = torch::randn({rows, h}, opts);
    const torch::Tensor w = (1 + 0.2 * torch::randn({h}, opts)), b = 0.1 * torch::randn({h}, opts);
    const torch::Tensor dy = torch::randn({rows, h}, opts), dres = torch::randn({rows, h}, opts);
    parallel::RngTracker rng(7, 0, 0, torch::Device(torch::kCUDA, 0));
    const ops::FusedLayerNormOutput f =
        ops::fused_layer_norm_forward(x, w, b, kEps, r, {p, &rng.default_generator(), true});
    const torch::Tensor keep = unpack_keep(f.keep);
    const auto type = c.dtype == torch::kFloat16 ? kernels::FloatType::kFloat16 : kernels::FloatType::kBFloat16;
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
    auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA);
    for (const kernels::LayerNormTuning& base : tunings) {
      for (bool fused : {true, false}) {
        kernels::LayerNormTuning tuning = base;
        tuning.backward_dropout_fused = fused;
        const std::string where = describe(c) + " floats " + std::to_string(tuning.backward_floats) + " rows " +
                                  std::to_string(tuning.backward_rows) + " stages " +
                                  std::to_string(tuning.backward_stages) + (fused ? " fused" : " separate");
        auto backward = [&](bool drop) {
          torch::Tensor dx = torch::empty_like(x), dxd = torch::zeros_like(x);
          torch::Tensor dw = torch::empty_like(w), db = torch::empty_like(b);
          const int64_t partials = kernels::layer_norm_backward_partials(type, rows, h, tuning, drop);
          torch::Tensor workspace = torch::empty({2, partials, h}, f32);
          kernels::ResidualDropoutGrad g;
          if (drop) g = {static_cast<float>(p), f.keep.data_ptr<uint8_t>(), dxd.data_ptr()};
          kernels::layer_norm_backward(dy.data_ptr(), f.sum.data_ptr(), w.data_ptr(), f.mean.data_ptr<float>(),
                                       f.rstd.data_ptr<float>(), dx.data_ptr(), dw.data_ptr(), db.data_ptr(),
                                       workspace.data_ptr<float>(), partials, type, rows, h, stream, dres.data_ptr(),
                                       tuning, g);
          return std::vector<torch::Tensor>{dx, dxd, dw, db};
        };
        const auto plain = backward(false), got = backward(true);
        EXPECT_TRUE(torch::equal(got[1], drop_scale(got[0], keep, p))) << where << ": dx_dropout";
        EXPECT_TRUE(torch::equal(got[0], plain[0])) << where << ": dx changed by the dropout";
        EXPECT_TRUE(torch::allclose(got[2].to(torch::kFloat32), plain[2].to(torch::kFloat32), 1e-2, 1e-2)) << where;
      }
    }
  }
}

// Bad arguments are refused before any launch: p outside [0, 1), fp32, missing keep bits or residual.
TEST(KernelsDropoutAddLayerNorm, RejectsBadArguments) {
  if (no_cuda()) GTEST_SKIP() << "no CUDA device";
  auto opts = torch::TensorOptions().device(torch::kCUDA);
  const torch::Tensor x = torch::randn({4, 64}, opts.dtype(torch::kBFloat16)), xf = x.to(torch::kFloat32);
  torch::Tensor y = torch::empty_like(x), sum = torch::empty_like(x), w = torch::ones({64}, x.options()),
                b = torch::zeros({64}, x.options());
  torch::Tensor mean = torch::empty({4}, opts.dtype(torch::kFloat32)), rstd = torch::empty_like(mean);
  torch::Tensor keep = torch::empty({32}, opts.dtype(torch::kUInt8));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  auto fwd = [&](float p, kernels::FloatType type, bool with_keep, bool with_residual) {
    kernels::ResidualDropout d;
    d.p = p;
    d.keep = with_keep ? keep.data_ptr<uint8_t>() : nullptr;
    kernels::layer_norm_forward(
        x.data_ptr(), w.data_ptr(), b.data_ptr(), y.data_ptr(), mean.data_ptr<float>(), rstd.data_ptr<float>(), type, 4,
        64, 1e-5f, stream, with_residual ? x.data_ptr() : nullptr, with_residual ? sum.data_ptr() : nullptr, {}, d);
  };
  EXPECT_THROW(fwd(1.0f, kernels::FloatType::kBFloat16, true, true), std::invalid_argument);
  EXPECT_THROW(fwd(-0.1f, kernels::FloatType::kBFloat16, true, true), std::invalid_argument);
  EXPECT_THROW(fwd(0.1f, kernels::FloatType::kFloat32, true, true), std::invalid_argument);
  EXPECT_THROW(fwd(0.1f, kernels::FloatType::kBFloat16, false, true), std::invalid_argument);
  EXPECT_THROW(fwd(0.1f, kernels::FloatType::kBFloat16, true, false), std::invalid_argument);
  EXPECT_NO_THROW(fwd(0.1f, kernels::FloatType::kBFloat16, true, true));
  // fp32 or a CPU generator: the composite path, not the kernel.
  parallel::RngTracker cpu_rng(1, 0, 0, torch::kCPU), gpu_rng(1, 0, 0, torch::Device(torch::kCUDA, 0));
  EXPECT_FALSE(ops::fused_dropout_add_layer_norm_supported(xf, {0.1, &gpu_rng.default_generator(), true}));
  EXPECT_FALSE(ops::fused_dropout_add_layer_norm_supported(x, {0.1, &cpu_rng.default_generator(), true}));
  EXPECT_TRUE(ops::fused_dropout_add_layer_norm_supported(x, {0.1, &gpu_rng.default_generator(), true}));
}
#endif
