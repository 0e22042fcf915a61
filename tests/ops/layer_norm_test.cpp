// The fused CUDA LayerNorm (kernels/layer_norm_kernels.cu via ops::layer_norm) against ATen's torch::layer_norm:
// output and the gradients of x, weight and bias (autograd backward of a random upstream gradient) for fp32 (tight),
// bf16 and fp16 (loose: both round fp32 results to 16 bits), over row counts 1..32768 and widths 8..16384 (each kernel
// configuration: a warp per row with 1-3 vectors per lane, multi-row blocks, one row per block, registers or a second
// read for x and dy; every LayerNormTuning choice on the kernels directly); inputs ATen keeps (misaligned, unsupported
// width, mixed dtypes) and a non-contiguous input. Skipped without CUDA (CPU builds and machines); run on the GPU
// machine by the lead.
#include "ops/layer_norm.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "ops/layer_norm_cuda.h"  // declares the fused path in CUDA builds only
#ifdef MEGATON_HAVE_CUDA
#include <c10/cuda/CUDAStream.h>

#include "layer_norm_kernels.h"
#endif

using namespace megaton;

namespace {

constexpr double kEps = 1e-5;

struct Result {
  torch::Tensor y, dx, dw, db;
  std::string grad_fn;  // name of y's autograd node: which path ran
};

Result run(const torch::Tensor& x_in, const torch::Tensor& w_in, const torch::Tensor& b_in, const torch::Tensor& dy,
           bool fused) {
  // detach() keeps x's layout (strides, storage offset): the misaligned and transposed cases stay what they are.
  torch::Tensor x = x_in.detach().requires_grad_(true);
  torch::Tensor w = w_in.detach().requires_grad_(true), b = b_in.detach().requires_grad_(true);
  torch::Tensor y = ops::layer_norm(x, w, b, kEps, fused);
  const std::string name = y.grad_fn() ? y.grad_fn()->name() : "none";
  y.backward(dy);
  return {y.detach(), x.grad(), w.grad(), b.grad(), name};
}

bool is_fused(const Result& r) {
  return r.grad_fn.find("FusedLayerNorm") != std::string::npos;
}

// |got - ref| <= atol + rtol * |ref| elementwise; the message names the worst element.
testing::AssertionResult close(const std::string& what, const torch::Tensor& got_in, const torch::Tensor& ref_in,
                               double atol, double rtol) {
  const torch::Tensor got = got_in.to(torch::kFloat64).reshape({-1}), ref = ref_in.to(torch::kFloat64).reshape({-1});
  if (got.numel() != ref.numel())
    return testing::AssertionFailure() << what << ": " << got.numel() << " elements, expected " << ref.numel();
  const torch::Tensor diff = (got - ref).abs();
  const torch::Tensor excess = diff / (atol + rtol * ref.abs());  // > 1: out of tolerance
  const int64_t i = excess.argmax().item<int64_t>();
  const double worst = excess[i].item<double>();
  if (!got.isfinite().all().item<bool>() || worst > 1.0)
    return testing::AssertionFailure() << what << ": max |diff| " << diff.max().item<double>() << "; worst element "
                                       << i << " fused " << got[i].item<double>() << " aten " << ref[i].item<double>()
                                       << " (tolerance " << atol << " + " << rtol << " * |aten|)"
                                       << (got.isfinite().all().item<bool>() ? "" : "; fused has inf/nan");
  return testing::AssertionSuccess();
}

// ||got - ref|| / ||ref|| < tol (for the sums over rows: dweight, dbias).
testing::AssertionResult close_norm(const std::string& what, const torch::Tensor& got_in, const torch::Tensor& ref_in,
                                    double tol) {
  const torch::Tensor got = got_in.to(torch::kFloat64), ref = ref_in.to(torch::kFloat64);
  const double err = (got - ref).norm().item<double>() / std::max(ref.norm().item<double>(), 1e-30);
  if (!(err < tol)) {
    const int64_t i = (got - ref).abs().argmax().item<int64_t>();
    return testing::AssertionFailure() << what << ": relative norm error " << err << " >= " << tol << "; worst element "
                                       << i << " fused " << got[i].item<double>() << " aten " << ref[i].item<double>();
  }
  return testing::AssertionSuccess();
}

struct Tol {
  double atol, rtol, norm;  // elementwise (y, dx) and relative-norm (dw, db)
};

// fp32: both paths compute in fp32 and differ by rounding (~1e-6 relative). 16-bit: the same fp32 values rounded to
// bf16/fp16 may land one unit in the last place apart (2^-8 relative for bf16).
Tol tolerance(torch::ScalarType dtype) {
  if (dtype == torch::kFloat32) return {1e-5, 1e-5, 1e-5};
  return {2e-2, 1e-2, 1e-2};
}

struct Inputs {
  torch::Tensor x, w, b, dy;
};

Inputs make_inputs(torch::ScalarType dtype, std::vector<int64_t> shape) {
  const int64_t h = shape.back();
  auto opts = torch::TensorOptions().device(torch::kCUDA);
  // Rows with a mean away from 0 and a spread per row, so that the mean subtraction and rstd matter.
  std::vector<int64_t> per_row(shape.size(), 1);
  per_row[0] = shape[0];
  torch::Tensor x = (torch::randn(shape, opts) * 2 + 0.5) * (torch::rand(per_row, opts) + 0.5);
  return {x.to(dtype), (1 + 0.2 * torch::randn({h}, opts)).to(dtype), (0.1 * torch::randn({h}, opts)).to(dtype),
          torch::randn(shape, opts).to(dtype)};
}

std::string describe(torch::ScalarType dtype, const std::vector<int64_t>& shape) {
  std::string s = std::string(c10::toString(dtype)) + " [";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void compare(torch::ScalarType dtype, std::vector<int64_t> shape) {
  torch::manual_seed(17 + shape.back());
  const std::string where = describe(dtype, shape);
  const Inputs in = make_inputs(dtype, shape);
  const Result ref = run(in.x, in.w, in.b, in.dy, false), got = run(in.x, in.w, in.b, in.dy, true);
  ASSERT_TRUE(is_fused(got)) << where << ": the fused path did not run (grad_fn " << got.grad_fn << ")";
  ASSERT_FALSE(is_fused(ref)) << where << ": use_fused=false ran the fused path";
  const Tol t = tolerance(dtype);
  EXPECT_TRUE(close(where + " y", got.y, ref.y, t.atol, t.rtol));
  EXPECT_TRUE(close(where + " dx", got.dx, ref.dx, t.atol, t.rtol));
  EXPECT_TRUE(close_norm(where + " dweight", got.dw, ref.dw, t.norm));
  EXPECT_TRUE(close_norm(where + " dbias", got.db, ref.db, t.norm));
  EXPECT_EQ(got.y.scalar_type(), dtype) << where;
  EXPECT_EQ(got.dw.scalar_type(), dtype) << where;
}

#ifdef MEGATON_HAVE_CUDA
// Inputs ATen keeps: the result is ATen's, bit for bit.
void expect_aten(const std::string& where, const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  torch::Tensor dy = torch::randn(x.sizes(), x.options());
  const Result got = run(x, w, b, dy, true), ref = run(x, w, b, dy, false);
  EXPECT_FALSE(is_fused(got)) << where << ": took the fused path (grad_fn " << got.grad_fn << ")";
  EXPECT_TRUE(torch::equal(got.y, ref.y)) << where;
  EXPECT_TRUE(torch::equal(got.dx, ref.dx)) << where;
}
#endif

bool skip() {
#ifndef MEGATON_HAVE_CUDA
  return true;  // not a CUDA build: ops::layer_norm has no fused path
#else
  return !torch::cuda::is_available();
#endif
}

const std::vector<int64_t> kRows = {1, 7, 4096, 32768};
const std::vector<int64_t> kWidths = {256, 768, 1024, 2048, 5120};

}  // namespace

TEST(KernelsLayerNorm, FusedMatchesAtenFp32) {
  if (skip()) GTEST_SKIP() << "no CUDA device or not a CUDA build";
  for (int64_t rows : kRows)
    for (int64_t h : kWidths) compare(torch::kFloat32, {rows, h});
}

TEST(KernelsLayerNorm, FusedMatchesAtenBf16) {
  if (skip()) GTEST_SKIP() << "no CUDA device or not a CUDA build";
  for (int64_t rows : kRows)
    for (int64_t h : kWidths) compare(torch::kBFloat16, {rows, h});
}

// The ends of the supported range and the kernels' other configurations: h = 8 (one vector per row), 16384 (fp32: 8
// vectors per thread, bf16: 4, both reading x and dy twice), 12288 (bf16: 3 per thread), fp16, [s, b, h] inputs.
TEST(KernelsLayerNorm, FusedMatchesAtenEdges) {
  if (skip()) GTEST_SKIP() << "no CUDA device or not a CUDA build";
  for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    compare(dtype, {7, 8});
    compare(dtype, {4096, 8});
    compare(dtype, {7, 16384});
    compare(dtype, {1024, 16384});
    compare(dtype, {33, 12288});
    compare(dtype, {100, 3 * 1024 + 8});
  }
  compare(torch::kFloat16, {4096, 768});
  compare(torch::kFloat16, {1000, 2048});
  compare(torch::kBFloat16, {512, 8, 768});  // [s, b, h]
  compare(torch::kFloat32, {3, 5, 1024});
}

// A non-contiguous x (a transposed [b, s, h] -> [s, b, h] view) is copied and takes the fused path.
TEST(KernelsLayerNorm, NonContiguousInput) {
  if (skip()) GTEST_SKIP() << "no CUDA device or not a CUDA build";
  torch::manual_seed(3);
  for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    Inputs in = make_inputs(dtype, {4, 64, 768});
    torch::Tensor xt = in.x.transpose(0, 1);  // [64, 4, 768], not contiguous
    torch::Tensor dy = in.dy.transpose(0, 1);
    const std::string where = describe(dtype, {64, 4, 768}) + " transposed";
    const Result ref = run(xt, in.w, in.b, dy, false), got = run(xt, in.w, in.b, dy, true);
    ASSERT_TRUE(is_fused(got)) << where << ": grad_fn " << got.grad_fn;
    const Tol t = tolerance(dtype);
    EXPECT_TRUE(close(where + " y", got.y, ref.y, t.atol, t.rtol));
    EXPECT_TRUE(close(where + " dx", got.dx, ref.dx, t.atol, t.rtol));
    EXPECT_TRUE(close_norm(where + " dweight", got.dw, ref.dw, t.norm));
    EXPECT_TRUE(close_norm(where + " dbias", got.db, ref.db, t.norm));
  }
}

// Unsupported inputs fall back to ATen: a contiguous x not 16-byte aligned, widths outside the range or not a
// multiple of 8, fp64, weight/bias of another dtype than x (only checked, not run: ATen's CUDA layer_norm may not
// take mixed dtypes either), CPU tensors.
TEST(KernelsLayerNorm, UnsupportedFallsBackToAten) {
  if (skip()) GTEST_SKIP() << "no CUDA device or not a CUDA build";
#ifdef MEGATON_HAVE_CUDA
  torch::manual_seed(4);
  auto opts = torch::TensorOptions().device(torch::kCUDA);
  {
    Inputs in = make_inputs(torch::kBFloat16, {64, 768});
    torch::Tensor flat = torch::randn({64 * 768 + 1}, opts).to(torch::kBFloat16);
    torch::Tensor misaligned = flat.narrow(0, 1, 64 * 768).view({64, 768});  // contiguous, 2 bytes off
    EXPECT_FALSE(ops::fused_layer_norm_supported(misaligned, in.w, in.b));
    expect_aten("bf16 [64, 768] at a 2-byte offset", misaligned, in.w, in.b);
  }
  for (int64_t h : {1004, 20480, 4}) {
    Inputs in = make_inputs(torch::kBFloat16, {16, h});
    EXPECT_FALSE(ops::fused_layer_norm_supported(in.x, in.w, in.b)) << "h = " << h;
    expect_aten("bf16 [16, " + std::to_string(h) + "]", in.x, in.w, in.b);
  }
  {
    Inputs in = make_inputs(torch::kFloat32, {16, 768});
    expect_aten("fp64", in.x.to(torch::kFloat64), in.w.to(torch::kFloat64), in.b.to(torch::kFloat64));
    EXPECT_TRUE(ops::fused_layer_norm_supported(in.x, in.w, in.b));
    EXPECT_FALSE(ops::fused_layer_norm_supported(in.x.to(torch::kBFloat16), in.w, in.b));
    EXPECT_FALSE(ops::fused_layer_norm_supported(in.x, in.w.to(torch::kBFloat16), in.b));
    EXPECT_FALSE(ops::fused_layer_norm_supported(in.x, in.w, in.b.to(torch::kFloat16)));
    EXPECT_FALSE(ops::fused_layer_norm_supported(in.x.cpu(), in.w.cpu(), in.b.cpu()));
    EXPECT_FALSE(ops::fused_layer_norm_supported(in.x.narrow(0, 0, 0), in.w, in.b));  // empty
  }
#endif
}

// ops::add_layer_norm: (sum, y) = (x + r, LayerNorm(x + r)) through the fused kernels (the add inside the forward,
// sum's own gradient added inside the backward) against x + r and ATen's layer_norm: both outputs and the gradients of
// x, r, weight and bias for random upstream gradients of both outputs.
TEST(KernelsLayerNorm, FusedAddMatchesAten) {
  if (skip()) GTEST_SKIP() << "no CUDA device or not a CUDA build";
  for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{512, 4, 768}, {256, 2, 2048}, {7, 1, 5120}}) {
      torch::manual_seed(23 + shape.back());
      const std::string where = describe(dtype, shape) + " add";
      const Inputs in = make_inputs(dtype, shape);
      const torch::Tensor r0 = torch::randn(in.x.sizes(), in.x.options()), dsum = torch::randn_like(in.dy);
      auto run_add = [&](bool fused) {
        torch::Tensor x = in.x.detach().requires_grad_(true), r = r0.detach().requires_grad_(true);
        torch::Tensor w = in.w.detach().requires_grad_(true), b = in.b.detach().requires_grad_(true);
        const ops::AddLayerNorm out = ops::add_layer_norm(x, r, w, b, kEps, fused);
        const std::string name = out.y.grad_fn() ? out.y.grad_fn()->name() : "none";
        torch::autograd::backward({out.sum, out.y}, {dsum, in.dy});
        return std::vector<torch::Tensor>{out.sum.detach(),
                                          out.y.detach(),
                                          x.grad(),
                                          r.grad(),
                                          w.grad(),
                                          b.grad(),
                                          torch::full({1}, name.find("FusedAddLayerNorm") != std::string::npos)};
      };
      const auto got = run_add(true), ref = run_add(false);
      ASSERT_TRUE(got[6].item<bool>()) << where << ": the fused add path did not run";
      ASSERT_FALSE(ref[6].item<bool>()) << where;
      const Tol t = tolerance(dtype);
      EXPECT_TRUE(torch::equal(got[0], ref[0])) << where << ": sum differs from ATen's x + r";
      EXPECT_TRUE(close(where + " y", got[1], ref[1], t.atol, t.rtol));
      EXPECT_TRUE(close(where + " dx", got[2], ref[2], t.atol, t.rtol));
      EXPECT_TRUE(torch::equal(got[2], got[3])) << where << ": dx and dr differ";
      EXPECT_TRUE(close_norm(where + " dweight", got[4], ref[4], t.norm));
      EXPECT_TRUE(close_norm(where + " dbias", got[5], ref[5], t.norm));
    }
  }
}

// Gradient accumulation fusion for the LayerNorm's weight and bias: with main grads, dgamma and dbeta are summed into
// them in fp32 (written while the overwrite flag is set, added after) and the parameters get no autograd gradient;
// the sums are what the returned 16-bit gradients round.
TEST(KernelsLayerNorm, GammaBetaIntoMainGrads) {
  if (skip()) GTEST_SKIP() << "no CUDA device or not a CUDA build";
  const Inputs in = make_inputs(torch::kBFloat16, {512, 4, 768});
  const torch::Tensor r0 = torch::randn(in.x.sizes(), in.x.options());
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(in.x.device());
  torch::Tensor main_w = torch::randn({768}, f32), main_b = torch::randn({768}, f32);
  torch::Tensor flag_w = torch::ones({1}, torch::kBool), flag_b = torch::zeros({1}, torch::kBool);
  const torch::Tensor old_b = main_b.clone();
  auto run = [&](const ops::LayerNormMainGrads& mg) {
    torch::Tensor x = in.x.detach().requires_grad_(true), r = r0.detach().requires_grad_(true);
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
  auto near = [](const torch::Tensor& a, const torch::Tensor& b16) {
    const torch::Tensor b = b16.to(torch::kFloat32);
    return ((a - b).abs().max() / b.abs().max()).item<double>() < 8e-3;
  };
  EXPECT_TRUE(near(main_w, ref[1])) << "dgamma written over the main grad";
  EXPECT_TRUE(near(main_b - old_b, ref[2])) << "dbeta added into the main grad";
  // The plain LayerNorm takes them too.
  torch::Tensor w = in.w.detach().requires_grad_(true), b = in.b.detach().requires_grad_(true);
  flag_w.fill_(true), flag_b.fill_(true);
  ops::layer_norm(in.x, w, b, kEps, true, {{main_w, flag_w}, {main_b, flag_b}}).backward(in.dy);
  EXPECT_FALSE(w.grad().defined() || b.grad().defined());
  EXPECT_FALSE(flag_b.item<bool>());
}

#ifdef MEGATON_HAVE_CUDA
// Every kernel configuration LayerNormTuning can pick (vectors per thread, a warp or a group of warps per row, one or
// two rows per backward pass, block sizes, the backward's shared-memory ring of 2 or 4 rows) on the kernels directly,
// as training calls them (forward with the residual add, backward with the residual gradient): sum, y, dx, dweight and
// dbias against ATen's x + r and layer_norm.
TEST(KernelsLayerNorm, EveryTuningMatchesAten) {
  if (skip()) GTEST_SKIP() << "no CUDA device or not a CUDA build";
  const kernels::LayerNormTuning tunings[] = {{},
                                              {32, 16, 1, 256, 256},
                                              {16, 8, 1, 512, 512},
                                              {16, 8, 2, 512, 128},
                                              {8, 8, 2, 128, 128},
                                              {32, 8, 2, 256, 512},
                                              {24, 24, 1, 512, 512},
                                              {32, 32, 1, 64, 64},
                                              {0, 8, 1, 256, 512, false},
                                              {24, 8, 1, 128, 96, true},
                                              {0, 8, 1, 256, 512, true, 2},
                                              {0, 8, 1, 256, 512, true, 0},
                                              {0, 8, 2, 256, 96, true, 4}};
  for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{7, 768}, {1000, 768}, {333, 2048}, {65, 5120}, {50, 256}}) {
      torch::manual_seed(31 + shape.back());
      const Inputs in = make_inputs(dtype, shape);
      const torch::Tensor r0 = torch::randn(in.x.sizes(), in.x.options()), dres = torch::randn_like(in.dy);
      torch::Tensor x = in.x.detach().requires_grad_(true), r = r0.detach().requires_grad_(true);
      torch::Tensor w = in.w.detach().requires_grad_(true), b = in.b.detach().requires_grad_(true);
      const ops::AddLayerNorm ref = ops::add_layer_norm(x, r, w, b, kEps, /*use_fused=*/false);
      torch::autograd::backward({ref.sum, ref.y}, {dres, in.dy});
      const int64_t rows = shape[0], h = shape[1];
      const auto type = dtype == torch::kFloat32 ? kernels::FloatType::kFloat32 : kernels::FloatType::kBFloat16;
      auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA);
      const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
      const Tol t = tolerance(dtype);
      for (const kernels::LayerNormTuning& tuning : tunings) {
        const std::string where =
            describe(dtype, shape) + " floats " + std::to_string(tuning.forward_floats) + "/" +
            std::to_string(tuning.backward_floats) + " rows " + std::to_string(tuning.backward_rows) + " blocks " +
            std::to_string(tuning.forward_block) + "/" + std::to_string(tuning.backward_block) +
            (tuning.backward_early_residual ? " early" : "") + " stages " + std::to_string(tuning.backward_stages);
        torch::Tensor y = torch::empty_like(in.x), sum = torch::empty_like(in.x), dx = torch::empty_like(in.x);
        torch::Tensor mean = torch::empty({rows}, f32), rstd = torch::empty({rows}, f32);
        torch::Tensor dw = torch::empty_like(in.w), db = torch::empty_like(in.b);
        kernels::layer_norm_forward(in.x.data_ptr(), in.w.data_ptr(), in.b.data_ptr(), y.data_ptr(),
                                    mean.data_ptr<float>(), rstd.data_ptr<float>(), type, rows, h, kEps, stream,
                                    r0.data_ptr(), sum.data_ptr(), tuning);
        const int64_t partials = kernels::layer_norm_backward_partials(type, rows, h, tuning);
        torch::Tensor workspace = torch::empty({2, partials, h}, f32);
        kernels::layer_norm_backward(in.dy.data_ptr(), sum.data_ptr(), in.w.data_ptr(), mean.data_ptr<float>(),
                                     rstd.data_ptr<float>(), dx.data_ptr(), dw.data_ptr(), db.data_ptr(),
                                     workspace.data_ptr<float>(), partials, type, rows, h, stream, dres.data_ptr(),
                                     tuning);
        EXPECT_TRUE(torch::equal(sum, ref.sum.detach())) << where << ": sum differs from ATen's x + r";
        EXPECT_TRUE(close(where + " y", y, ref.y.detach(), t.atol, t.rtol));
        EXPECT_TRUE(close(where + " dx", dx, x.grad(), t.atol, t.rtol));
        EXPECT_TRUE(close_norm(where + " dweight", dw, w.grad(), t.norm));
        EXPECT_TRUE(close_norm(where + " dbias", db, b.grad(), t.norm));
      }
    }
  }
}
#endif
