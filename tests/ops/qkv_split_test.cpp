// ops::split_qkv: q, k, v as views of the QKV output, the backward assembling their gradients into one and giving the
// QKV bias its gradient.
//   QkvSplit.*         against linear (with the bias) + unbind through ATen's autograd, fp64 on the CPU: outputs and
//                      the gradients of x, w and b, also with an output the loss does not use and without a bias;
//                      split_qkv's checks.
//   KernelsQkvSplit.*  the interleave + bias-gradient kernel on CUDA (bf16, fp16) against torch::stack and a column
//                      sum, also reading parts narrowed from wider heads; the autograd function on CUDA against the
//                      ATen reference.
//                      Skipped without CUDA; run on the GPU machine by perf/gpu/run.sh.
#include "ops/qkv_split.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "core/error.h"
#include "model/positions.h"
#include "ops/attention.h"
#include "ops/gelu_bias_grad.h"

using namespace megaton;

namespace {

constexpr int64_t kS = 5, kB = 3, kHeads = 2, kD = 8, kH = 16;  // hidden 16 -> QKV 3 * 2 heads * 8 = 48

struct Grads {
  torch::Tensor q, dx, dw, db;
};

// loss = sum of (q, k, v) weighted by fixed random tensors (uses: which of the three enter the loss). fused: linear
// with the bias detached + split_qkv; else linear + unbind, the bias's gradient from autograd.
// alibi: the loss is the weighted sum of the ALiBi attention's context instead (folded into the heads on CUDA: dq and
// dk reach the split narrowed from d + 8 columns).
Grads run(bool fused, torch::TensorOptions o, std::vector<bool> uses = {true, true, true}, bool with_bias = true,
          bool alibi = false) {
  torch::manual_seed(11);
  torch::Tensor x = torch::randn({kS, kB, kH}, torch::kFloat64).to(o).requires_grad_();
  torch::Tensor w = torch::randn({3 * kHeads * kD, kH}, torch::kFloat64).mul(0.3).to(o).requires_grad_();
  torch::Tensor b =
      with_bias ? torch::randn({3 * kHeads * kD}, torch::kFloat64).to(o).requires_grad_() : torch::Tensor();
  std::vector<torch::Tensor> weights;
  for (int i = 0; i < 3; ++i) weights.push_back(torch::randn({kS, kB, kHeads, kD}, torch::kFloat64).to(o));
  std::vector<torch::Tensor> parts;
  if (fused) {
    torch::Tensor qkv = torch::linear(x, w, b.defined() ? b.detach() : b).view({kS, kB, kHeads, 3, kD});
    const auto split = ops::split_qkv(qkv, b);
    parts.assign(split.begin(), split.end());
  } else {
    parts = torch::linear(x, w, b).view({kS, kB, kHeads, 3, kD}).unbind(3);
  }
  torch::Tensor loss = torch::zeros({}, o);
  for (int i = 0; i < 3; ++i)
    if (uses[i]) loss = loss + (parts[i] * weights[i]).sum();
  if (alibi) {
    ops::AttentionOptions ao;
    ao.alibi = model::alibi_bias(int(kHeads), 0, int(kHeads), kS, x.device());          // [np, 1, s]
    const torch::Tensor ctx = ops::causal_attention(parts[0], parts[1], parts[2], ao);  // [s, b, np d]
    loss = (ctx * weights[0].reshape({kS, kB, kHeads * kD})).sum();
  }
  loss.backward();
  return {parts[0].detach(), x.grad(), w.grad(), b.defined() ? b.grad() : torch::Tensor()};
}

void expect_same(const Grads& got, const Grads& ref, double tol) {
  EXPECT_TRUE(torch::allclose(got.q, ref.q, tol, tol));
  EXPECT_TRUE(torch::allclose(got.dx, ref.dx, tol, tol));
  EXPECT_TRUE(torch::allclose(got.dw, ref.dw, tol, tol));
  ASSERT_EQ(got.db.defined(), ref.db.defined());
  if (ref.db.defined()) {
    EXPECT_TRUE(torch::allclose(got.db, ref.db, tol, tol));
  }
}

}  // namespace

TEST(QkvSplit, MatchesLinearAndUnbindOnCpu) {
  const auto o = torch::TensorOptions().dtype(torch::kFloat64);
  expect_same(run(true, o), run(false, o), 1e-12);
}

TEST(QkvSplit, UnusedOutputGetsZeroGradientAndBiasStillItsShare) {
  const auto o = torch::TensorOptions().dtype(torch::kFloat64);
  const std::vector<bool> uses = {true, false, true};  // k unused: its columns of db are zero
  Grads got = run(true, o, uses), ref = run(false, o, uses);
  expect_same(got, ref, 1e-12);
  const torch::Tensor db_k = got.db.view({kHeads, 3, kD}).select(1, 1);
  EXPECT_EQ(db_k.abs().max().item<double>(), 0.0);
  EXPECT_GT(got.db.abs().max().item<double>(), 0.0);
}

TEST(QkvSplit, WithoutBiasIsUnbind) {
  const auto o = torch::TensorOptions().dtype(torch::kFloat64);
  expect_same(run(true, o, {true, true, true}, false), run(false, o, {true, true, true}, false), 1e-12);
}

TEST(QkvSplit, RejectsWrongShapes) {
  torch::Tensor qkv = torch::zeros({kS, kB, kHeads, 3, kD});
  EXPECT_THROW(ops::split_qkv(qkv.view({kS, kB, kHeads * 3 * kD}), {}), InternalError);
  torch::Tensor bad_bias = torch::zeros({7}).requires_grad_();
  EXPECT_THROW(ops::split_qkv(qkv, bad_bias), InternalError);
}

#ifdef MEGATON_HAVE_CUDA
TEST(KernelsQkvSplit, FusedMatchesStackAndColumnSums) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(5);
  for (torch::ScalarType t : {torch::kBFloat16, torch::kFloat16}) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{1024, 8, 12, 64}, std::vector<int64_t>{37, 3, 2, 8},
                                       std::vector<int64_t>{129, 2, 16, 128}}) {  // [s, b, np, d]
      const auto o = torch::TensorOptions().device(torch::kCUDA).dtype(t);
      torch::Tensor dq = torch::randn(shape, o), dk = torch::randn(shape, o), dv = torch::randn(shape, o);
      ASSERT_TRUE(ops::qkv_interleave_fused_supported(dq, dk, dv));
      auto [d_qkv, db] = ops::qkv_interleave_bias_grad_fused(dq, dk, dv);
      const torch::Tensor ref = torch::stack({dq, dk, dv}, 3);  // [s, b, np, 3, d]
      EXPECT_TRUE(torch::equal(d_qkv, ref)) << c10::toString(t) << " " << shape;
      const int64_t cols = 3 * shape[2] * shape[3];
      const torch::Tensor db_ref = ref.reshape({-1, cols}).to(torch::kFloat32).sum(0);  // fp32, then rounded
      const double scale = db_ref.abs().max().item<double>();
      EXPECT_LE((db.to(torch::kFloat32) - db_ref).abs().max().item<double>(), 1e-2 * scale + 1e-3)
          << c10::toString(t) << " " << shape;
    }
  }
  // a non-contiguous part (e.g. a transposed view) is not taken
  const auto o = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  torch::Tensor a = torch::randn({4, 2, 3, 8}, o), nc = torch::randn({2, 4, 3, 8}, o).transpose(0, 1);
  EXPECT_FALSE(ops::qkv_interleave_fused_supported(a, nc, a));
  EXPECT_FALSE(ops::qkv_interleave_fused_supported(a, a, a.to(torch::kFloat32)));
}

// The folded ALiBi's dq and dk are the first d columns of [s, b, np, d + 8] (ops/attention.h): the kernel reads them
// in place, with the same bits as from contiguous copies.
TEST(KernelsQkvSplit, NarrowedWiderHeadsMatchContiguousParts) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(6);
  const auto o = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  for (std::vector<int64_t> shape : {std::vector<int64_t>{64, 4, 12, 64}, std::vector<int64_t>{33, 2, 1, 16},
                                     std::vector<int64_t>{17, 1, 3, 128}}) {  // [s, b, np, d]
    std::vector<int64_t> wide = shape;
    wide.back() += 8;
    const torch::Tensor dq = torch::randn(wide, o).narrow(-1, 0, shape.back());  // [s, b, np, d] of d + 8
    const torch::Tensor dk = torch::randn(wide, o).narrow(-1, 0, shape.back());
    const torch::Tensor dv = torch::randn(shape, o);
    ASSERT_FALSE(dq.is_contiguous());
    ASSERT_TRUE(ops::qkv_interleave_fused_supported(dq, dk, dv)) << shape;
    auto [d_qkv, db] = ops::qkv_interleave_bias_grad_fused(dq, dk, dv);
    auto [d_ref, db_ref] = ops::qkv_interleave_bias_grad_fused(dq.contiguous(), dk.contiguous(), dv);
    EXPECT_TRUE(torch::equal(d_qkv, d_ref)) << shape;
    EXPECT_TRUE(torch::equal(db, db_ref)) << shape;
    EXPECT_TRUE(torch::equal(d_qkv, torch::stack({dq, dk, dv}, 3))) << shape;
  }
  // heads 4 apart, narrower than d, and rows with gaps between them are not taken
  const torch::Tensor a = torch::randn({4, 2, 3, 8}, o);
  EXPECT_FALSE(ops::qkv_interleave_fused_supported(torch::randn({4, 2, 3, 12}, o).narrow(-1, 0, 8), a, a));
  EXPECT_FALSE(ops::qkv_interleave_fused_supported(torch::randn({4, 3, 3, 8}, o).narrow(1, 0, 2), a, a));
}

TEST(KernelsQkvSplit, AutogradMatchesLinearAndUnbind) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto o = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  for (const std::vector<bool>& uses : {std::vector<bool>{true, true, true}, std::vector<bool>{false, true, true}}) {
    Grads got = run(true, o, uses), ref = run(false, o, uses);
    // the same bf16 GEMMs; db summed in fp32 by the kernel and by ATen's sum in other orders
    expect_same(got, ref, 2e-2);
  }
  // through the folded ALiBi attention (its dq, dk read in place from the wider heads)
  expect_same(run(true, o, {true, true, true}, true, true), run(false, o, {true, true, true}, true, true), 2e-2);
}
#endif  // MEGATON_HAVE_CUDA
