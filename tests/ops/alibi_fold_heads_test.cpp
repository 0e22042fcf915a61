// ops::fold_heads (ops/alibi_fold_heads.h), the folded ALiBi's widened query and key heads:
//   FoldHeads.*         on the CPU (the torch::cat path): the values, the gradients (the first d columns), bad shapes.
//   KernelsFoldHeads.*  on CUDA: the kernel bit-equal to torch::cat for q and k as views of the QKV output (Megatron's
//                       [s, b, np, 3, d]) and contiguous, bf16 and fp16, b = 1 and > 1; what it does not take.
//                       Skipped without CUDA; run on the GPU machine by perf/gpu/run.sh.
#include "ops/alibi_fold_heads.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "core/error.h"

using namespace megaton;

namespace {

// q, k as the model makes them: views of qkv [s, b, np, 3, d]; the extras as attention.cpp makes them.
struct Inputs {
  torch::Tensor qkv, q, k, v, q_extra, k_extra;
  Inputs(int64_t s, int64_t b, int64_t np, int64_t d, torch::TensorOptions o)
      : qkv(torch::randn({s, b, np, 3, d}, o)),
        q(qkv.select(3, 0)),
        k(qkv.select(3, 1)),
        v(qkv.select(3, 2)),
        q_extra(torch::tensor({1, 1, 1, 0, 0, 0, 0, 0}, o)),
        k_extra(torch::randn({s, 1, np, 8}, o)) {}
};

}  // namespace

TEST(FoldHeads, ValuesAndGradientsOnCpu) {
  torch::manual_seed(3);
  const auto o = torch::TensorOptions().dtype(torch::kFloat32);
  Inputs in(5, 3, 2, 8, o);
  torch::Tensor qkv = in.qkv.clone().requires_grad_();
  const torch::Tensor q = qkv.select(3, 0), k = qkv.select(3, 1), v = qkv.select(3, 2);
  const ops::FoldedHeads f = ops::fold_heads(q, k, v, in.q_extra, in.k_extra);  // q', k' [s, b, np, 16]
  ASSERT_EQ(f.q.sizes(), (std::vector<int64_t>{5, 3, 2, 16}));
  EXPECT_TRUE(torch::equal(f.q.narrow(-1, 0, 8), q));
  EXPECT_TRUE(torch::equal(f.k.narrow(-1, 0, 8), k));
  EXPECT_TRUE(torch::equal(f.q.narrow(-1, 8, 8), in.q_extra.expand({5, 3, 2, 8})));
  EXPECT_TRUE(torch::equal(f.k.narrow(-1, 8, 8), in.k_extra.expand({5, 3, 2, 8})));
  EXPECT_TRUE(torch::equal(f.v, v));
  const torch::Tensor wq = torch::randn(f.q.sizes(), o), wk = torch::randn(f.k.sizes(), o);
  const torch::Tensor wv = torch::randn(f.v.sizes(), o);
  ((f.q * wq).sum() + (f.k * wk).sum() + (f.v * wv).sum()).backward();
  const torch::Tensor g = qkv.grad();  // [s, b, np, 3, d]
  EXPECT_TRUE(torch::equal(g.select(3, 0), wq.narrow(-1, 0, 8)));
  EXPECT_TRUE(torch::equal(g.select(3, 1), wk.narrow(-1, 0, 8)));
  EXPECT_TRUE(torch::equal(g.select(3, 2), wv));
}

TEST(FoldHeads, RejectsBadShapes) {
  const auto o = torch::TensorOptions().dtype(torch::kFloat32);
  Inputs in(4, 2, 3, 8, o);
  EXPECT_THROW(ops::fold_heads(in.q, in.k.narrow(0, 0, 3), in.v, in.q_extra, in.k_extra), InternalError);
  EXPECT_THROW(ops::fold_heads(in.q, in.k, in.v.narrow(1, 0, 1), in.q_extra, in.k_extra), InternalError);
  EXPECT_THROW(ops::fold_heads(in.q, in.k, in.v, in.q_extra.narrow(0, 0, 4), in.k_extra), InternalError);
  EXPECT_THROW(ops::fold_heads(in.q, in.k, in.v, in.q_extra, in.k_extra.narrow(2, 0, 2)), InternalError);
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
        const torch::Tensor v = views ? in.v : in.v.contiguous();
        ASSERT_TRUE(ops::fold_heads_fused_supported(q, k, v, in.q_extra, in.k_extra)) << shape;
        const ops::FoldedHeads f = ops::fold_heads_fused(q, k, v, in.q_extra, in.k_extra);
        const int64_t s = shape[0], b = shape[1], np = shape[2];
        EXPECT_TRUE(torch::equal(f.q, torch::cat({q, in.q_extra.expand({s, b, np, 8})}, -1))) << shape;
        EXPECT_TRUE(torch::equal(f.k, torch::cat({k, in.k_extra.expand({s, b, np, 8})}, -1))) << shape;
        EXPECT_TRUE(torch::equal(f.v, v)) << shape;
        // One buffer [s, b, np, 3, d + 8], v's extra columns zero; v no longer holds the QKV output.
        EXPECT_TRUE(f.q.is_alias_of(f.k) && f.q.is_alias_of(f.v));
        EXPECT_FALSE(f.v.is_alias_of(in.qkv));
        const int64_t w = shape[3] + 8;
        const torch::Tensor buffer =
            f.q.as_strided({s, b, np, 3, w}, {b * np * 3 * w, np * 3 * w, 3 * w, w, 1}, f.q.storage_offset());
        EXPECT_EQ(buffer.select(3, 2).narrow(-1, shape[3], 8).abs().max().item<float>(), 0.0f) << shape;
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
  const ops::FoldedHeads f =
      ops::fold_heads(qkv.select(3, 0), qkv.select(3, 1), qkv.select(3, 2), in.q_extra, in.k_extra);
  const torch::Tensor wq = torch::randn(f.q.sizes(), o), wk = torch::randn(f.k.sizes(), o);
  const torch::Tensor wv = torch::randn(f.v.sizes(), o);
  const auto f32 = [](const torch::Tensor& t) { return t.to(torch::kFloat32); };
  ((f32(f.q) * f32(wq)).sum() + (f32(f.k) * f32(wk)).sum() + (f32(f.v) * f32(wv)).sum()).backward();
  EXPECT_TRUE(torch::equal(qkv.grad().select(3, 0), wq.narrow(-1, 0, 64)));
  EXPECT_TRUE(torch::equal(qkv.grad().select(3, 1), wk.narrow(-1, 0, 64)));
  EXPECT_TRUE(torch::equal(qkv.grad().select(3, 2), wv));
}

TEST(KernelsFoldHeads, UnsupportedLayoutsAreRefused) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto o = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  Inputs in(16, 4, 2, 16, o);
  const auto t01 = [](const torch::Tensor& t) { return t.transpose(0, 1); };
  EXPECT_FALSE(ops::fold_heads_fused_supported(t01(in.q), t01(in.k), t01(in.v), in.q_extra, in.k_extra));
  // v [s, b, np, d] whose rows are not one stride apart (a transposed [b, s, np, d])
  const torch::Tensor v_rows_apart = torch::randn({4, 16, 2, 16}, o).transpose(0, 1);
  EXPECT_FALSE(ops::fold_heads_fused_supported(in.q, in.k, v_rows_apart, in.q_extra, in.k_extra));
  EXPECT_FALSE(ops::fold_heads_fused_supported(in.q.to(torch::kFloat32), in.k, in.v, in.q_extra, in.k_extra));
  EXPECT_FALSE(ops::fold_heads_fused_supported(in.q, in.k, in.v, in.q_extra, in.k_extra.expand({16, 4, 2, 8})));
  const auto n12 = [](const torch::Tensor& t) { return t.narrow(-1, 0, 12); };
  EXPECT_FALSE(ops::fold_heads_fused_supported(n12(in.q), n12(in.k), n12(in.v), in.q_extra, in.k_extra));
  // The fallback of an unsupported layout: torch::cat, v passed through.
  const ops::FoldedHeads f = ops::fold_heads(in.q, in.k, v_rows_apart, in.q_extra, in.k_extra);
  EXPECT_TRUE(f.v.is_alias_of(v_rows_apart));
  EXPECT_TRUE(torch::equal(f.q.narrow(-1, 0, 16), in.q));
}

#endif  // MEGATON_HAVE_CUDA
