// ops::fold_heads (ops/alibi_fold_heads.h), the folded ALiBi's widened query and key heads:
//   FoldHeads.*         on the CPU (the torch::cat path): the values, the gradients (the first d columns), bad shapes.
//   KernelsFoldHeads.*  on CUDA: the kernel bit-equal to torch::cat for q and k as views of the QKV output (Megatron's
//                       [s, b, np, 3, d]) and contiguous, bf16 and fp16, b = 1 and > 1; what it does not take.
//                       Skipped without CUDA; run on the GPU machine by perf/gpu/session_batch.sh.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "core/error.h"
#include "ops/alibi_fold_heads.h"

using namespace megaton;

namespace {

// q, k as the model makes them: views of qkv [s, b, np, 3, d]; the extras as attention.cpp makes them.
struct Inputs {
  torch::Tensor qkv, q, k, q_extra, k_extra;
  Inputs(int64_t s, int64_t b, int64_t np, int64_t d, torch::TensorOptions o)
      : qkv(torch::randn({s, b, np, 3, d}, o)),
        q(qkv.select(3, 0)),
        k(qkv.select(3, 1)),
        q_extra(torch::tensor({1, 1, 1, 0, 0, 0, 0, 0}, o)),
        k_extra(torch::randn({s, 1, np, 8}, o)) {}
};

}  // namespace

TEST(FoldHeads, ValuesAndGradientsOnCpu) {
  torch::manual_seed(3);
  const auto o = torch::TensorOptions().dtype(torch::kFloat32);
  Inputs in(5, 3, 2, 8, o);
  torch::Tensor qkv = in.qkv.clone().requires_grad_();
  const torch::Tensor q = qkv.select(3, 0), k = qkv.select(3, 1);
  const auto [qf, kf] = ops::fold_heads(q, k, in.q_extra, in.k_extra);  // [s, b, np, 16]
  ASSERT_EQ(qf.sizes(), (std::vector<int64_t>{5, 3, 2, 16}));
  EXPECT_TRUE(torch::equal(qf.narrow(-1, 0, 8), q));
  EXPECT_TRUE(torch::equal(kf.narrow(-1, 0, 8), k));
  EXPECT_TRUE(torch::equal(qf.narrow(-1, 8, 8), in.q_extra.expand({5, 3, 2, 8})));
  EXPECT_TRUE(torch::equal(kf.narrow(-1, 8, 8), in.k_extra.expand({5, 3, 2, 8})));
  const torch::Tensor wq = torch::randn(qf.sizes(), o), wk = torch::randn(kf.sizes(), o);
  ((qf * wq).sum() + (kf * wk).sum()).backward();
  const torch::Tensor g = qkv.grad();  // [s, b, np, 3, d]
  EXPECT_TRUE(torch::equal(g.select(3, 0), wq.narrow(-1, 0, 8)));
  EXPECT_TRUE(torch::equal(g.select(3, 1), wk.narrow(-1, 0, 8)));
  EXPECT_EQ(g.select(3, 2).abs().max().item<float>(), 0.0f);
}

TEST(FoldHeads, RejectsBadShapes) {
  const auto o = torch::TensorOptions().dtype(torch::kFloat32);
  Inputs in(4, 2, 3, 8, o);
  EXPECT_THROW(ops::fold_heads(in.q, in.k.narrow(0, 0, 3), in.q_extra, in.k_extra), InternalError);
  EXPECT_THROW(ops::fold_heads(in.q, in.k, in.q_extra.narrow(0, 0, 4), in.k_extra), InternalError);
  EXPECT_THROW(ops::fold_heads(in.q, in.k, in.q_extra, in.k_extra.narrow(2, 0, 2)), InternalError);
}

#ifdef MEGATON_HAVE_CUDA
TEST(KernelsFoldHeads, KernelMatchesCatBitForBit) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(4);
  for (torch::ScalarType t : {torch::kBFloat16, torch::kFloat16}) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{1024, 8, 12, 64}, std::vector<int64_t>{37, 1, 2, 8},
                                       std::vector<int64_t>{65, 3, 16, 128}}) {  // [s, b, np, d]
      const auto o = torch::TensorOptions().device(torch::kCUDA).dtype(t);
      Inputs in(shape[0], shape[1], shape[2], shape[3], o);
      for (bool views : {true, false}) {
        const torch::Tensor q = views ? in.q : in.q.contiguous(), k = views ? in.k : in.k.contiguous();
        ASSERT_TRUE(ops::fold_heads_fused_supported(q, k, in.q_extra, in.k_extra)) << shape;
        const auto [qf, kf] = ops::fold_heads_fused(q, k, in.q_extra, in.k_extra);
        const int64_t s = shape[0], b = shape[1], np = shape[2];
        EXPECT_TRUE(torch::equal(qf, torch::cat({q, in.q_extra.expand({s, b, np, 8})}, -1))) << shape;
        EXPECT_TRUE(torch::equal(kf, torch::cat({k, in.k_extra.expand({s, b, np, 8})}, -1))) << shape;
      }
    }
  }
}

TEST(KernelsFoldHeads, AutogradThroughTheKernel) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(5);
  const auto o = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  Inputs in(33, 2, 4, 64, o);
  torch::Tensor qkv = in.qkv.clone().requires_grad_();
  const auto [qf, kf] = ops::fold_heads(qkv.select(3, 0), qkv.select(3, 1), in.q_extra, in.k_extra);
  const torch::Tensor wq = torch::randn(qf.sizes(), o), wk = torch::randn(kf.sizes(), o);
  ((qf.to(torch::kFloat32) * wq.to(torch::kFloat32)).sum() + (kf.to(torch::kFloat32) * wk.to(torch::kFloat32)).sum())
      .backward();
  EXPECT_TRUE(torch::equal(qkv.grad().select(3, 0), wq.narrow(-1, 0, 64)));
  EXPECT_TRUE(torch::equal(qkv.grad().select(3, 1), wk.narrow(-1, 0, 64)));
}

TEST(KernelsFoldHeads, UnsupportedLayoutsAreRefused) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto o = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  Inputs in(16, 4, 2, 16, o);
  EXPECT_FALSE(ops::fold_heads_fused_supported(in.q.transpose(0, 1), in.k.transpose(0, 1), in.q_extra, in.k_extra));
  EXPECT_FALSE(ops::fold_heads_fused_supported(in.q.to(torch::kFloat32), in.k, in.q_extra, in.k_extra));
  EXPECT_FALSE(ops::fold_heads_fused_supported(in.q, in.k, in.q_extra, in.k_extra.expand({16, 4, 2, 8})));
  EXPECT_FALSE(ops::fold_heads_fused_supported(in.q.narrow(-1, 0, 12), in.k.narrow(-1, 0, 12), in.q_extra, in.k_extra));
}
#endif  // MEGATON_HAVE_CUDA
