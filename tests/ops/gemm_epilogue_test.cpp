// ops/gemm_epilogue.h against the same math through ATen's autograd (torch::linear, torch::gelu(.., "tanh")): outputs
// and the gradients of every input for a random upstream gradient.
//   GemmEpilogue.*         the autograd functions on their ATen path (CPU, fp64: equal to rounding) — the wiring of
//                          the backward (which GEMM gives which gradient) that the CUDA path shares.
//   KernelsGemmEpilogue.*  the cuBLASLt epilogues on CUDA in bf16 and fp16 (each lt:: call must find an algorithm,
//                          so the fused path is what is checked), against the reference in fp32 on the same inputs,
//                          and the MLP with each choice of epilogues (ops::MlpEpilogues). Skipped without CUDA.
#include "ops/gemm_epilogue.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "ops/cublaslt_gemm.h"  // declares the cuBLASLt calls in CUDA builds only

using namespace megaton;

namespace {

struct Inputs {
  torch::Tensor x, w1, b1, w2, b2, dy;  // x [T, h] (or [s, b, h]), w1 [f, h], b1 [f], w2 [h, f], b2 [h], dy like y
};

Inputs make_inputs(std::vector<int64_t> x_shape, int64_t f, torch::TensorOptions o, bool with_b2 = true) {
  torch::manual_seed(7);
  const int64_t h = x_shape.back();
  auto r = [&](std::vector<int64_t> shape, double scale) {
    return (torch::randn(shape, torch::kFloat64) * scale).to(o);
  };
  Inputs in;
  in.x = r(x_shape, 1.0);
  in.w1 = r({f, h}, 1.0 / std::sqrt(double(h)));
  in.b1 = r({f}, 0.5);
  in.w2 = r({h, f}, 1.0 / std::sqrt(double(f)));
  if (with_b2) in.b2 = r({h}, 0.5);
  in.dy = r(x_shape, 1.0);
  return in;
}

std::vector<torch::Tensor> leaves(const Inputs& in, torch::ScalarType dtype) {
  std::vector<torch::Tensor> out;
  for (const torch::Tensor& t : {in.x, in.w1, in.b1, in.w2, in.b2})
    out.push_back(t.defined() ? t.detach().to(dtype).requires_grad_(true) : torch::Tensor());
  return out;
}

// [y, dx, dw1, db1, dw2, db2] of the MLP, fused (ops::bias_gelu_mlp through `epilogues`) or through ATen's autograd
// in `dtype`.
std::vector<torch::Tensor> mlp_results(const Inputs& in, bool fused, torch::ScalarType dtype,
                                       ops::MlpEpilogues epilogues = {true, false}) {
  std::vector<torch::Tensor> p = leaves(in, dtype);
  torch::Tensor y = fused ? ops::bias_gelu_mlp(p[0], p[1], p[2], p[3], p[4], epilogues)
                          : torch::linear(torch::gelu(torch::linear(p[0], p[1], p[2]), "tanh"), p[3], p[4]);
  y.backward(in.dy.to(dtype));
  return {y.detach(),  p[0].grad(), p[1].grad(),
          p[2].grad(), p[3].grad(), p[4].defined() ? p[4].grad() : torch::Tensor()};
}

// ||got - ref|| / ||ref|| < tol.
testing::AssertionResult close(const std::string& what, const torch::Tensor& got, const torch::Tensor& ref,
                               double tol) {
  if (!got.defined() || !ref.defined())
    return got.defined() == ref.defined() ? testing::AssertionSuccess()
                                          : testing::AssertionFailure() << what << ": defined only on one side";
  if (got.sizes() != ref.sizes())
    return testing::AssertionFailure() << what << ": shape " << got.sizes() << ", expected " << ref.sizes();
  const torch::Tensor g = got.to(torch::kFloat64).cpu(), r = ref.to(torch::kFloat64).cpu();
  const double err = (g - r).norm().item<double>() / std::max(r.norm().item<double>(), 1e-30);
  if (!(err < tol)) return testing::AssertionFailure() << what << ": relative norm error " << err << " >= " << tol;
  return testing::AssertionSuccess();
}

const char* const kMlpNames[] = {"y", "dx", "dw1", "db1", "dw2", "db2"};

}  // namespace

TEST(GemmEpilogue, BiasGeluMlpMatchesAutogradOnCpu) {
  for (bool with_b2 : {true, false}) {
    Inputs in = make_inputs({5, 3, 16}, 24, torch::kFloat64, with_b2);
    EXPECT_FALSE(ops::gemm_epilogue_supported({in.x, in.w1, in.b1}));  // CPU tensors take the ATen path
    auto got = mlp_results(in, true, torch::kFloat64, {true, true}), ref = mlp_results(in, false, torch::kFloat64);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(close(kMlpNames[i], got[i], ref[i], 1e-12)) << "b2 " << with_b2;
  }
}

TEST(GemmEpilogue, SupportNeedsCuda16BitAndWidthsOf8) {
  torch::Tensor a = torch::zeros({4, 16}, torch::kBFloat16);
  EXPECT_FALSE(ops::gemm_epilogue_supported({a}));  // CPU
  EXPECT_FALSE(ops::gemm_epilogue_supported({}));
}

#ifdef MEGATON_HAVE_CUDA
namespace {

bool cuda() {
  return torch::cuda::is_available();
}

// bf16 keeps 8 bits of mantissa: the fused and the fp32 reference results differ by the roundings of the inputs'
// products (relative ~2^-8 per element, smaller in norm).
double tolerance(torch::ScalarType dtype) {
  return dtype == torch::kBFloat16 ? 2e-2 : 4e-3;
}

}  // namespace

TEST(KernelsGemmEpilogue, EachEpilogueFindsAnAlgorithmAndMatches) {
  if (!cuda()) GTEST_SKIP() << "no CUDA device";
  for (torch::ScalarType dtype : {torch::kBFloat16, torch::kFloat16}) {
    const auto o = torch::TensorOptions().dtype(dtype).device(torch::kCUDA);
    Inputs in = make_inputs({1000, 64}, 256, o);  // T = 1000: not a multiple of the tile sizes
    const double tol = tolerance(dtype);
    torch::Tensor x = in.x, w1 = in.w1, b1 = in.b1, w2 = in.w2, dy = in.dy;
    torch::Tensor act = torch::empty({1000, 256}, o), pre = torch::empty_like(act);
    ASSERT_TRUE(ops::lt::linear_gelu_aux(x, w1, b1, act, pre));
    // Through a memo: the heuristic is asked once for the key, and the remembered algorithm gives the same bits.
    ops::GemmAlgoMemo memo;
    torch::Tensor act_m = torch::empty_like(act), pre_m = torch::empty_like(pre);
    ASSERT_TRUE(ops::lt::linear_gelu_aux(x, w1, b1, act_m, pre_m, &memo));
    ASSERT_TRUE(ops::lt::linear_gelu_aux(x, w1, b1, act_m, pre_m, &memo));
    EXPECT_EQ(memo.size(), 1u);
    EXPECT_TRUE(torch::equal(act_m, act) && torch::equal(pre_m, pre));
    torch::Tensor pre_ref = torch::linear(x.to(torch::kFloat32), w1.to(torch::kFloat32), b1.to(torch::kFloat32));
    EXPECT_TRUE(close("pre", pre, pre_ref, tol));
    EXPECT_TRUE(close("act", act, torch::gelu(pre_ref, "tanh"), tol));

    torch::Tensor d_pre_ref = torch::gelu_backward(torch::mm(dy.to(torch::kFloat32), w2.to(torch::kFloat32)),
                                                   pre.to(torch::kFloat32), "tanh");
    torch::Tensor d_pre = torch::empty_like(pre);
    ASSERT_TRUE(ops::lt::linear_dgelu(dy, w2, pre, d_pre));
    EXPECT_TRUE(close("d_pre (DGELU)", d_pre, d_pre_ref, tol));
  }
}

TEST(KernelsGemmEpilogue, MlpMatchesAten) {
  if (!cuda()) GTEST_SKIP() << "no CUDA device";
  for (torch::ScalarType dtype : {torch::kBFloat16, torch::kFloat16}) {
    for (bool with_b2 : {true, false}) {
      // {false, false}: ATen's forward, the fused GELU + bias-gradient backward; backward: the DGELU epilogue
      for (ops::MlpEpilogues e : {ops::MlpEpilogues{true, false}, ops::MlpEpilogues{false, false},
                                  ops::MlpEpilogues{true, true}, ops::MlpEpilogues{false, true}}) {
        const auto o = torch::TensorOptions().dtype(dtype).device(torch::kCUDA);
        Inputs in = make_inputs({128, 3, 96}, 384, o, with_b2);  // [s, b, h]
        ASSERT_TRUE(ops::gemm_epilogue_supported({in.x, in.w1, in.b1, in.w2, in.b2}));
        auto got = mlp_results(in, true, dtype, e), ref = mlp_results(in, false, torch::kFloat32);
        for (size_t i = 0; i < got.size(); ++i)
          EXPECT_TRUE(close(kMlpNames[i], got[i], ref[i], tolerance(dtype)))
              << c10::toString(dtype) << " b2 " << with_b2 << " epilogues " << e.forward << e.backward;
      }
    }
  }
}

TEST(KernelsGemmEpilogue, UnsupportedShapesStayOnAten) {
  if (!cuda()) GTEST_SKIP() << "no CUDA device";
  const auto o = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA);
  EXPECT_FALSE(ops::gemm_epilogue_supported({torch::zeros({4, 12}, o)}));  // width not a multiple of 8
  EXPECT_FALSE(ops::gemm_epilogue_supported({torch::zeros({4, 16}, o.dtype(torch::kFloat32))}));
  EXPECT_FALSE(ops::gemm_epilogue_supported({torch::zeros({4, 16}, o), torch::zeros({16}, o.dtype(torch::kFloat16))}));
  // width 12: the autograd function still gives ATen's results through its fallback
  Inputs in = make_inputs({10, 12}, 20, o);
  auto got = mlp_results(in, true, torch::kBFloat16, {true, true}), ref = mlp_results(in, false, torch::kFloat32);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(close(kMlpNames[i], got[i], ref[i], 2e-2));
}
#endif  // MEGATON_HAVE_CUDA

TEST(GemmAlgoMemo, RemembersPerKeyIncludingNoAlgorithm) {
  ops::GemmAlgoMemo memo;
  EXPECT_FALSE(memo.find({1, 2, 3}).has_value());
  memo.remember({1, 2, 3}, {7, 8});
  memo.remember({1, 2, 4}, {});  // cuBLASLt offered none for this key
  ASSERT_TRUE(memo.find({1, 2, 3}).has_value());
  EXPECT_EQ(*memo.find({1, 2, 3}), (ops::GemmAlgoMemo::Algo{7, 8}));
  ASSERT_TRUE(memo.find({1, 2, 4}).has_value());
  EXPECT_TRUE(memo.find({1, 2, 4})->empty());
  EXPECT_EQ(memo.size(), 2u);
}
