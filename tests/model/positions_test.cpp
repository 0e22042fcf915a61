// Position encodings, attention and activations against their defining formulas.
#include "model/positions.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/torch_compat.h"
#include "ops/activations.h"
#include "ops/attention.h"

using namespace megaton;

TEST(ModelAlibi, SlopesPowerOfTwo) {
  // 8 heads: start = 2^-(2^-(3-3)) = 1/2, slopes 2^-1 .. 2^-8.
  const auto s8 = model::alibi_slopes(8);
  ASSERT_EQ(s8.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_DOUBLE_EQ(s8[i], std::pow(2.0, -(i + 1))) << i;
  // 4 heads: start = 2^-2, slopes 2^-2, 2^-4, 2^-6, 2^-8.
  const auto s4 = model::alibi_slopes(4);
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(s4[i], std::pow(2.0, -2 * (i + 1))) << i;
}

TEST(ModelAlibi, SlopesNotPowerOfTwo) {
  // 6 heads: the 4-head slopes, then every other slope of the 8-head list (2^-1, 2^-3).
  const auto s = model::alibi_slopes(6);
  const std::vector<double> want{0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
  ASSERT_EQ(s.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_DOUBLE_EQ(s[i], want[i]) << i;
}

TEST(ModelAlibi, BiasIsSlopeTimesKeyPositionForThisRanksHeads) {
  const auto slopes = model::alibi_slopes(8);
  torch::Tensor b = model::alibi_bias(8, 4, 2, 5, torch::kCPU);  // heads 4 and 5
  ASSERT_EQ(b.sizes(), (std::vector<int64_t>{2, 1, 5}));
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < 5; ++j) EXPECT_FLOAT_EQ(b[h][0][j].item<float>(), float(slopes[4 + h] * j));
}

namespace {
// softmax(q k^T / sqrt(d) + bias, causal) v, one (batch, head) at a time, in double; `mask` [b, 1, s, s] (true =
// masked) also leaves out the keys it masks.
torch::Tensor reference_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const std::vector<double>& slopes, const torch::Tensor& mask = {}) {
  const int64_t s = q.size(0), b = q.size(1), np = q.size(2), d = q.size(3);
  auto out = torch::zeros({s, b, np, d}, torch::kFloat64);
  auto q64 = q.to(torch::kFloat64), k64 = k.to(torch::kFloat64), v64 = v.to(torch::kFloat64);
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t h = 0; h < np; ++h)
      for (int64_t i = 0; i < s; ++i) {
        std::vector<double> w(i + 1);
        double mx = -1e300, z = 0;
        for (int64_t j = 0; j <= i; ++j) {
          if (mask.defined() && mask[bi][0][i][j].item<bool>()) {
            w[j] = -INFINITY;
            continue;
          }
          w[j] = (q64[i][bi][h] * k64[j][bi][h]).sum().item<double>() / std::sqrt(double(d)) +
                 (slopes.empty() ? 0.0 : slopes[h] * j);
          mx = std::max(mx, w[j]);
        }
        for (auto& x : w) z += (x = std::exp(x - mx));
        for (int64_t j = 0; j <= i; ++j) out[i][bi][h] += v64[j][bi][h] * (w[j] / z);
      }
  return out.view({s, b, np * d});
}
}  // namespace

TEST(ModelAttention, CausalAndAlibiMatchDirectFormula) {
  torch::manual_seed(3);
  const int64_t s = 6, b = 2, np = 4, d = 8;
  auto q = torch::randn({s, b, np, d}), k = torch::randn({s, b, np, d}), v = torch::randn({s, b, np, d});
  ops::AttentionOptions o;
  o.use_fused = false;
  auto plain = ops::causal_attention(q, k, v, o);
  EXPECT_LT((plain.to(torch::kFloat64) - reference_attention(q, k, v, {})).abs().max().item<double>(), 1e-5);
  // Megatron's query-key layer scaling changes nothing mathematically.
  o.layer_scale = 3.0;
  EXPECT_LT((ops::causal_attention(q, k, v, o) - plain).abs().max().item<double>(), 1e-5);
  o.layer_scale = 1.0;
  o.alibi = model::alibi_bias(np, 0, np, s, torch::kCPU);
  auto alibi = ops::causal_attention(q, k, v, o);
  EXPECT_LT(
      (alibi.to(torch::kFloat64) - reference_attention(q, k, v, model::alibi_slopes(np))).abs().max().item<double>(),
      1e-5);
  EXPECT_GT((alibi - plain).abs().max().item<double>(), 1e-3);  // the bias does something
  if (compat::kHasSdpa) {                                       // fused path agrees with the explicit one
    o.use_fused = true;
    EXPECT_LT((ops::causal_attention(q, k, v, o) - alibi).abs().max().item<double>(), 1e-5);
  }
}

namespace {

// Documents against the formula, plain and with ALiBi (explicit path, fp32); the fused paths against the explicit one
// where LibTorch has them (the variable-length kernel where it applies, the boolean mask, the additive one ALiBi
// makes).
void check_documents(torch::Device device, torch::ScalarType dtype, double tol) {
  torch::manual_seed(4);
  const int64_t s = 7, b = 2, np = 4, d = 8;
  auto opts = torch::TensorOptions().device(device).dtype(dtype);
  auto q = torch::randn({s, b, np, d}, opts), k = torch::randn({s, b, np, d}, opts),
       v = torch::randn({s, b, np, d}, opts);
  const torch::Tensor doc =
      torch::tensor({0, 0, 1, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1}, torch::kInt64).view({b, s}).to(device);  // [b, s]
  ops::AttentionOptions o;
  o.use_fused = false;
  o.documents = ops::Documents(doc, device);
  EXPECT_TRUE(torch::equal(o.documents.cu_seqlens().cpu(), torch::tensor({0, 2, 5, 7, 11, 14}, torch::kInt32)));
  EXPECT_EQ(o.documents.max_length(), 4);
  const torch::Tensor mask = o.documents.mask().cpu();  // [b, 1, s, s]
  const torch::Tensor plain = ops::causal_attention(q, k, v, o);
  EXPECT_LT((plain.cpu().to(torch::kFloat64) - reference_attention(q.cpu(), k.cpu(), v.cpu(), {}, mask))
                .abs()
                .max()
                .item<double>(),
            tol);
  o.alibi = model::alibi_bias(np, 0, np, s, device);
  const torch::Tensor alibi = ops::causal_attention(q, k, v, o);
  EXPECT_LT(
      (alibi.cpu().to(torch::kFloat64) - reference_attention(q.cpu(), k.cpu(), v.cpu(), model::alibi_slopes(np), mask))
          .abs()
          .max()
          .item<double>(),
      tol);
  // The documents do something: the causal attention differs (first sample's third query onwards).
  ops::AttentionOptions causal = o;
  causal.documents = ops::Documents();
  EXPECT_GT((ops::causal_attention(q, k, v, causal) - alibi).abs().max().item<double>(), 1e-3);
  if (!compat::kHasSdpa) return;
  o.use_fused = true;
  EXPECT_LT((ops::causal_attention(q, k, v, o) - alibi).abs().max().item<double>(), tol);
  o.alibi = torch::Tensor();
  EXPECT_EQ(ops::uses_varlen(q, o), device.is_cuda() && dtype != torch::kFloat32 && compat::kHasVarlenFlash);
  EXPECT_LT((ops::causal_attention(q, k, v, o) - plain).abs().max().item<double>(), tol);
  o.use_varlen = false;  // the boolean mask through SDPA
  EXPECT_LT((ops::causal_attention(q, k, v, o) - plain).abs().max().item<double>(), tol);
  // Documents of another batch are refused on every path.
  for (bool varlen : {false, true}) {
    o.use_varlen = varlen;
    o.documents = ops::Documents(doc.narrow(0, 0, 1), device);
    EXPECT_THROW(ops::causal_attention(q, k, v, o), InternalError);
  }
}

}  // namespace

TEST(ModelAttention, GivenMaskReplacesTheCausalOne) {
  check_documents(torch::kCPU, torch::kFloat32, 1e-5);
  ops::AttentionOptions o;
  o.use_fused = false;
  o.documents = ops::Documents(torch::zeros({1, 3}, torch::kInt64), torch::kCPU);
  const auto x = torch::randn({3, 2, 1, 4});
  EXPECT_THROW(ops::causal_attention(x, x, x, o), InternalError);                        // batch 2, documents for 1
  EXPECT_THROW(ops::Documents(torch::tensor({{0, 1, 0}}), torch::kCPU), InternalError);  // ids must not decrease
  EXPECT_THROW(ops::Documents(torch::zeros({3}), torch::kCPU), InternalError);           // [b, s] integers
}

TEST(KernelsAttention, GivenMaskOnCudaMatchesTheExplicitPath) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  check_documents(torch::kCUDA, torch::kFloat32, 1e-4);
  check_documents(torch::kCUDA, torch::kBFloat16, 5e-2);
}

namespace {

// A variable-length kernel's forward and backward against the explicit path in fp32 on the same (bf16-rounded)
// inputs, at a training-like head size, over documents with the given lengths in each of two samples of s tokens.
void check_varlen(int64_t s, const std::vector<std::vector<int64_t>>& lengths) {
  SCOPED_TRACE("s " + std::to_string(s));
  torch::manual_seed(8);
  const torch::Device dev(torch::kCUDA, 0);
  const int64_t b = 2, np = 2, d = 64;
  auto opts = torch::TensorOptions().device(dev).dtype(torch::kBFloat16);
  const torch::Tensor q0 = torch::randn({s, b, np, d}, opts), k0 = torch::randn({s, b, np, d}, opts),
                      v0 = torch::randn({s, b, np, d}, opts), dout = torch::randn({s, b, np * d}, opts);
  torch::Tensor doc = torch::zeros({b, s}, torch::kInt64);  // [b, s]
  int64_t longest = 0;
  for (int64_t i = 0; i < b; ++i) {
    int64_t at = 0, id = 0;
    for (int64_t n : lengths[size_t(i)]) {
      doc[i].narrow(0, at, n).fill_(id++);
      at += n;
      longest = std::max(longest, n);
    }
    ASSERT_EQ(at, s);
  }
  ops::AttentionOptions o;
  o.documents = ops::Documents(doc, dev);
  EXPECT_EQ(o.documents.max_length(), longest);
  ASSERT_TRUE(ops::uses_varlen(q0, o));
  auto run = [&](torch::ScalarType dtype, bool fused) {
    std::vector<torch::Tensor> in;
    // Fresh leaves each run: to(dtype) of q0 in its own dtype would be q0 itself, and the next run's a non-leaf.
    for (const auto& t : {q0, k0, v0}) in.push_back(t.detach().to(dtype).clone().requires_grad_(true));
    ops::AttentionOptions oo = o;
    oo.use_fused = fused;
    const torch::Tensor out = ops::causal_attention(in[0], in[1], in[2], oo);  // [s, b, np*d]
    out.backward(dout.to(dtype));
    return std::vector<torch::Tensor>{out.to(torch::kFloat32), in[0].grad().to(torch::kFloat32),
                                      in[1].grad().to(torch::kFloat32), in[2].grad().to(torch::kFloat32)};
  };
  const auto varlen = run(torch::kBFloat16, true), ref = run(torch::kFloat32, false);
  const char* names[] = {"context", "dq", "dk", "dv"};
  for (size_t i = 0; i < ref.size(); ++i) {
    const double err = (varlen[i] - ref[i]).norm().item<double>() / ref[i].norm().item<double>();
    EXPECT_LT(err, 1e-2) << names[i];
  }
  // The documents matter: without them a later document of sample 0 reads the first.
  ops::AttentionOptions causal;
  EXPECT_GT((ops::causal_attention(q0, k0, v0, causal).to(torch::kFloat32) - varlen[0]).abs().max().item<double>(),
            1e-2);
}

}  // namespace

// ALiBi's additive mask on the fused path is made once per forward and shared through the cache the layers are given
// (SDPA keeps it for the backward: one mask per forward, not one per layer), remade when the shape or dtype changes;
// the same attention as without the cache.
TEST(KernelsAttention, AlibiMaskIsMadeOncePerForward) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  if (!compat::kHasSdpa) GTEST_SKIP() << "LibTorch " << compat::torch_version() << " has no fused attention";
  torch::manual_seed(5);
  const torch::Device dev(torch::kCUDA, 0);
  const int64_t s = 16, b = 2, np = 4, d = 32;
  auto opts = torch::TensorOptions().device(dev).dtype(torch::kBFloat16);
  const auto q = torch::randn({s, b, np, d}, opts), k = torch::randn({s, b, np, d}, opts),
             v = torch::randn({s, b, np, d}, opts);
  ops::AttentionOptions o;
  o.alibi = model::alibi_bias(np, 0, np, s, dev);
  o.alibi_fold = false;                                           // the mask (the fold's cache: below)
  const torch::Tensor alone = ops::causal_attention(q, k, v, o);  // no cache
  o.alibi_mask_cache = std::make_shared<torch::Tensor>();
  const torch::Tensor first = ops::causal_attention(q, k, v, o);
  ASSERT_TRUE(o.alibi_mask_cache->defined());
  EXPECT_EQ(o.alibi_mask_cache->sizes(), (std::vector<int64_t>{1, np, s, s}));
  const void* made = o.alibi_mask_cache->data_ptr();
  const torch::Tensor second = ops::causal_attention(q, k, v, o);  // the next layer of the same forward
  EXPECT_EQ(o.alibi_mask_cache->data_ptr(), made) << "the second layer made a mask of its own";
  EXPECT_TRUE(torch::equal(first, alone));
  EXPECT_TRUE(torch::equal(second, alone));
  // Documents change the mask's shape: it is remade, [b, np, s, s], and not taken for the causal one.
  const torch::Tensor doc = (torch::arange(s) >= s / 2).to(torch::kInt64).unsqueeze(0).repeat({b, 1});  // [b, s]
  o.documents = ops::Documents(doc, dev);
  o.use_varlen = false;
  const torch::Tensor with_docs = ops::causal_attention(q, k, v, o);
  EXPECT_EQ(o.alibi_mask_cache->sizes(), (std::vector<int64_t>{b, np, s, s}));
  ops::AttentionOptions fresh = o;
  fresh.alibi_mask_cache = nullptr;
  EXPECT_TRUE(torch::equal(with_docs, ops::causal_attention(q, k, v, fresh)));
  EXPECT_FALSE(torch::equal(with_docs, alone));
  // Folded into the heads (the default), the cache holds the key columns [s, 1, np, 8], made once too.
  ops::AttentionOptions fold;
  fold.alibi = o.alibi;
  fold.alibi_mask_cache = std::make_shared<torch::Tensor>();
  if (!ops::uses_alibi_fold(q, fold)) GTEST_SKIP() << "LibTorch " << compat::torch_version() << " has no SDPA scale";
  const torch::Tensor f1 = ops::causal_attention(q, k, v, fold);
  ASSERT_TRUE(fold.alibi_mask_cache->defined());
  EXPECT_EQ(fold.alibi_mask_cache->sizes(), (std::vector<int64_t>{s, 1, np, 8}));
  const void* cols = fold.alibi_mask_cache->data_ptr();
  EXPECT_TRUE(torch::equal(ops::causal_attention(q, k, v, fold), f1));
  EXPECT_EQ(fold.alibi_mask_cache->data_ptr(), cols) << "the second layer made key columns of its own";
}

// ALiBi folded into 8 extra head dimensions (ops::uses_alibi_fold, the default on a GPU in bf16/fp16) against the exact
// bias (the explicit path in fp32 on the same bf16-rounded inputs: the bias slope * j in fp32), forward and gradients,
// at training head sizes over 512 positions, where the steepest of 4 heads' biases (slope 1/4) reach 128: the 16-bit
// mask (--no-alibi-fold, Megatron's rounding) is further from the exact bias than the fold. Where the fold applies:
// not with documents, not in fp32, not when fp16 cannot hold b sqrt(d), not with alibi_fold off.
TEST(KernelsAttention, AlibiFoldedIntoTheHeadsMatchesTheExactBias) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  if (!compat::kHasSdpaScale) GTEST_SKIP() << "LibTorch " << compat::torch_version() << " has no SDPA scale";
  const torch::Device dev(torch::kCUDA, 0);
  const int64_t s = 512, b = 2, np = 4;
  for (const int64_t d : {64, 128}) {
    SCOPED_TRACE("d " + std::to_string(d));
    torch::manual_seed(11);
    auto opts = torch::TensorOptions().device(dev).dtype(torch::kBFloat16);
    const torch::Tensor q0 = torch::randn({s, b, np, d}, opts), k0 = torch::randn({s, b, np, d}, opts),
                        v0 = torch::randn({s, b, np, d}, opts), dout = torch::randn({s, b, np * d}, opts);
    ops::AttentionOptions o;
    o.alibi = model::alibi_bias(np, 0, np, s, dev);
    ASSERT_TRUE(ops::uses_alibi_fold(q0, o));
    auto run = [&](torch::ScalarType dtype, bool fused, bool fold) {
      std::vector<torch::Tensor> in;
      for (const auto& t : {q0, k0, v0}) in.push_back(t.detach().to(dtype).clone().requires_grad_(true));
      ops::AttentionOptions oo = o;
      oo.use_fused = fused;
      oo.alibi_fold = fold;
      const torch::Tensor out = ops::causal_attention(in[0], in[1], in[2], oo);  // [s, b, np*d]
      out.backward(dout.to(dtype));
      return std::vector<torch::Tensor>{out.detach().to(torch::kFloat32), in[0].grad().to(torch::kFloat32),
                                        in[1].grad().to(torch::kFloat32), in[2].grad().to(torch::kFloat32)};
    };
    const auto exact = run(torch::kFloat32, false, false), folded = run(torch::kBFloat16, true, true),
               masked = run(torch::kBFloat16, true, false);
    const char* names[] = {"context", "dq", "dk", "dv"};
    for (size_t i = 0; i < exact.size(); ++i) {
      const double fold_err = (folded[i] - exact[i]).norm().item<double>() / exact[i].norm().item<double>();
      const double mask_err = (masked[i] - exact[i]).norm().item<double>() / exact[i].norm().item<double>();
      EXPECT_LT(fold_err, 1e-2) << names[i];
      if (i == 0) EXPECT_GT(mask_err, 2 * fold_err) << "the 16-bit mask should round the bias visibly at s " << s;
    }
    // The bias matters: without ALiBi the context differs.
    ops::AttentionOptions none;
    EXPECT_GT((ops::causal_attention(q0, k0, v0, none).to(torch::kFloat32) - folded[0]).abs().max().item<double>(),
              1e-1);
  }
  ops::AttentionOptions o;
  o.alibi = model::alibi_bias(4, 0, 4, 16, dev);
  const auto half = torch::TensorOptions().device(dev).dtype(torch::kFloat16);
  EXPECT_TRUE(ops::uses_alibi_fold(torch::empty({2048, 1, 4, 128}, half), o));   // 2048 * sqrt(128) < 32768
  EXPECT_FALSE(ops::uses_alibi_fold(torch::empty({4096, 1, 4, 128}, half), o));  // fp16 cannot hold the columns
  EXPECT_FALSE(ops::uses_alibi_fold(torch::empty({16, 1, 4, 128}, half.dtype(torch::kFloat32)), o));
  EXPECT_FALSE(ops::uses_alibi_fold(torch::empty({16, 1, 4, 128}, half).cpu(), o));
  o.alibi_fold = false;
  EXPECT_FALSE(ops::uses_alibi_fold(torch::empty({16, 1, 4, 128}, half), o));
  o.alibi_fold = true;
  o.documents = ops::Documents(torch::zeros({1, 16}, torch::kInt64), dev);
  EXPECT_FALSE(ops::uses_alibi_fold(torch::empty({16, 1, 4, 128}, half), o));
}

// Short documents (10, 30 and 24 tokens in one sample, 63 and 1 in the other) and documents longer than the head size
// (200 and 184; one of 384), which a kernel that took the head size for the longest document would get wrong (cuDNN's
// ragged SDPA through ATen 2.11 does: infinite dq and dk).
TEST(KernelsAttention, VarlenDocumentsMatchTheExplicitPathWithGradients) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  if (!compat::kHasVarlenFlash) GTEST_SKIP() << "LibTorch " << compat::torch_version() << " has no varlen flash";
  check_varlen(64, {{10, 30, 24}, {63, 1}});
  check_varlen(384, {{200, 184}, {384}});
}

namespace {

// Attention dropout in training on `device` (the fused path where LibTorch has it): the masks come from the generator
// passed in (equal generators, equal outputs; the generator advances), and the device's default generator is left as it
// was. A fused path that held the default generator's mutex across the kernel, which locks it itself, would never
// return from the first such call on LibTorch >= 2.
void check_attention_dropout(torch::Device device, torch::ScalarType dtype, bool documents = false) {
  torch::manual_seed(6);
  auto opts = torch::TensorOptions().device(device).dtype(dtype);
  const int64_t s = 64, b = 2, np = 2, d = 64;
  auto q = torch::randn({s, b, np, d}, opts), k = torch::randn({s, b, np, d}, opts),
       v = torch::randn({s, b, np, d}, opts);
  at::Generator def = at::globalContext().defaultGenerator(device);
  torch::Tensor def_before;
  {
    std::lock_guard<std::mutex> lock(def.mutex());
    def_before = def.get_state();
  }
  auto make_gen = [&] {
    at::Generator g = def.clone();
    g.set_current_seed(42);
    return g;
  };
  at::Generator g1 = make_gen(), g2 = make_gen();
  ops::AttentionOptions o;
  o.dropout_p = 0.5, o.training = true;
  o.dropout_generator = &g1;
  if (documents) {  // two documents in each sample (on CUDA in bf16: the variable-length kernel)
    const torch::Tensor doc = (torch::arange(s) >= s / 3).to(torch::kInt64).unsqueeze(0).repeat({b, 1});  // [b, s]
    o.documents = ops::Documents(doc, device);
  }
  const torch::Tensor a = ops::causal_attention(q, k, v, o);  // [s, b, np*d]
  o.dropout_generator = &g2;
  const torch::Tensor b2 = ops::causal_attention(q, k, v, o);
  EXPECT_TRUE(torch::equal(a, b2)) << "equal generators, equal masks";
  o.dropout_generator = &g1;
  EXPECT_FALSE(torch::equal(a, ops::causal_attention(q, k, v, o))) << "the generator advanced";
  o.training = false;
  EXPECT_FALSE(torch::equal(a, ops::causal_attention(q, k, v, o))) << "dropout was active in training";
  std::lock_guard<std::mutex> lock(def.mutex());
  EXPECT_TRUE(torch::equal(def.get_state(), def_before)) << "the default generator was left as it was";
}

}  // namespace

TEST(ModelAttention, DropoutDrawsFromTheGivenGenerator) {
  check_attention_dropout(torch::kCPU, torch::kFloat32);
  check_attention_dropout(torch::kCPU, torch::kFloat32, /*documents=*/true);
}

TEST(KernelsAttention, DropoutDrawsFromTheGivenGeneratorOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  check_attention_dropout(torch::Device(torch::kCUDA, 0), torch::kBFloat16);
  check_attention_dropout(torch::Device(torch::kCUDA, 0), torch::kBFloat16, /*documents=*/true);
}

TEST(ModelAttention, ExplicitPathInBf16StaysCloseToFp32) {
  torch::manual_seed(4);
  auto q = torch::randn({5, 1, 2, 8}), k = torch::randn({5, 1, 2, 8}), v = torch::randn({5, 1, 2, 8});
  ops::AttentionOptions o;
  o.use_fused = false;
  o.layer_scale = 2.0;
  auto ref = ops::causal_attention(q, k, v, o);
  auto bf = ops::causal_attention(q.to(torch::kBFloat16), k.to(torch::kBFloat16), v.to(torch::kBFloat16), o);
  EXPECT_EQ(bf.scalar_type(), torch::kBFloat16);
  EXPECT_LT((bf.to(torch::kFloat32) - ref).abs().max().item<double>(), 5e-2);
}

TEST(ModelRotary, MatchesPairwiseRotationFormula) {
  const int64_t s = 7, d = 8;
  auto [cos, sin] = model::rotary_tables(s, d, torch::kCPU);
  torch::manual_seed(5);
  auto x = torch::randn({s, 1, 1, d});
  auto y = model::apply_rotary(x, cos, sin);
  for (int64_t p = 0; p < s; ++p)
    for (int64_t i = 0; i < d / 2; ++i) {
      const double theta = p * std::pow(10000.0, -2.0 * i / d);
      const double a = x[p][0][0][i].item<double>(), b = x[p][0][0][i + d / 2].item<double>();
      EXPECT_NEAR(y[p][0][0][i].item<double>(), a * std::cos(theta) - b * std::sin(theta), 1e-5);
      EXPECT_NEAR(y[p][0][0][i + d / 2].item<double>(), b * std::cos(theta) + a * std::sin(theta), 1e-5);
    }
}

TEST(ModelRotary, ScoresDependOnlyOnRelativePosition) {
  const int64_t s = 12, d = 16;
  auto [cos, sin] = model::rotary_tables(s, d, torch::kCPU);
  torch::manual_seed(6);
  auto q = torch::randn({d}), k = torch::randn({d});
  // The same q and k placed at every position.
  auto qs = q.view({1, 1, 1, d}).expand({s, 1, 1, d}).contiguous();
  auto ks = k.view({1, 1, 1, d}).expand({s, 1, 1, d}).contiguous();
  auto rq = model::apply_rotary(qs, cos, sin).view({s, d}), rk = model::apply_rotary(ks, cos, sin).view({s, d});
  auto score = [&](int64_t m, int64_t n) { return (rq[m] * rk[n]).sum().item<double>(); };
  for (int64_t shift = 1; shift < 4; ++shift)
    for (int64_t m = 0; m + shift < s; ++m)
      for (int64_t n = 0; n + shift < s; ++n) EXPECT_NEAR(score(m, n), score(m + shift, n + shift), 1e-4);
  EXPECT_GT(std::abs(score(5, 1) - score(1, 5)) + std::abs(score(0, 0) - score(0, 3)), 1e-3);  // not trivial
  EXPECT_NEAR(rq.norm(2, 1).sub(q.norm()).abs().max().item<double>(), 0.0, 1e-4);              // a rotation
}

TEST(ModelActivations, GluVariantsMatchFormulas) {
  torch::manual_seed(7);
  auto x = torch::randn({3, 10});
  auto x1 = x.narrow(1, 0, 5), x2 = x.narrow(1, 5, 5);
  auto sig = 1.0 / (1.0 + torch::exp(-x2));
  auto erf_gelu = 0.5 * x2 * (1.0 + torch::erf(x2 / std::sqrt(2.0)));
  auto close = [](const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>() < 1e-5; };
  EXPECT_TRUE(close(ops::apply_activation(x, ops::Activation::kSwiglu), x1 * x2 * sig));
  EXPECT_TRUE(close(ops::apply_activation(x, ops::Activation::kGeglu), x1 * erf_gelu));
  EXPECT_TRUE(close(ops::apply_activation(x, ops::Activation::kReglu), x1 * x2.clamp_min(0)));
  EXPECT_TRUE(close(ops::apply_activation(x, ops::Activation::kLiglu), x1 * x2));
  const double c = std::sqrt(2.0 / M_PI);
  auto tanh_gelu = 0.5 * x * (1.0 + torch::tanh(c * (x + 0.044715 * x * x * x)));
  EXPECT_TRUE(close(ops::apply_activation(x, ops::Activation::kGeluTanh), tanh_gelu));
  EXPECT_EQ(ops::activation_from_flags("", false, true), ops::Activation::kGeluTanh);  // Megatron's fused default
  EXPECT_EQ(ops::activation_from_flags("", false, false), ops::Activation::kGeluErf);
  EXPECT_THROW(ops::activation_from_flags("gelu2", false, true), UsageError);
}
