// The fused CUDA Adam (kernels/adam_kernels.cu via optim::adam_step_fused) against the ATen path
// (optim::adam_step_aten, the CPU path of MixedPrecisionOptimizer): several steps on buffers of odd sizes, weight
// decay on part of the buffer, a clip coefficient, 16-byte aligned and unaligned buffers, bf16/fp16 parameters written
// by the kernel; and the optimizer with the fused path against itself with --no-fused-adam. Skipped without CUDA (the
// chunk-table test runs everywhere); run on the GPU machine by perf/gpu/run.sh.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "optim/adam_step.h"
#include "optim/optim_test_support.h"
#include "optim/optimizer.h"
#include "parallel/data/data_parallel.h"

using namespace megaton;

namespace {

// Decay runs over part of [0, n): [1, n/3) and [n/2, n - 1) where not empty.
std::vector<optim::Run> some_runs(int64_t n) {
  std::vector<optim::Run> runs;
  if (n / 3 > 1) runs.push_back({1, n / 3 - 1});
  if (n - 1 > n / 2) runs.push_back({n / 2, n - 1 - n / 2});
  return runs;
}

// Largest |a - b| relative to the largest |b| (fp32 buffers).
double rel_err(const torch::Tensor& a, const torch::Tensor& b) {
  const double scale = std::max(b.abs().max().item<double>(), 1e-30);
  return (a - b).abs().max().item<double>() / scale;
}

struct Buffers {
  torch::Tensor master, m, v;  // [n] fp32 each
};

// `offset` > 0 places every buffer `offset` floats into a larger allocation (not 16-byte aligned: the scalar path).
Buffers make_buffers(int64_t n, int64_t offset, const torch::TensorOptions& o) {
  auto at = [&](torch::Tensor t) { return t.narrow(0, offset, n); };
  return {at(torch::randn({n + offset}, o)), at(torch::randn({n + offset}, o) * 0.01),
          at(torch::rand({n + offset}, o) * 1e-4)};
}

Buffers clone(const Buffers& b) {
  return {b.master.clone(), b.m.clone(), b.v.clone()};
}

void compare(int64_t n, int64_t offset, torch::ScalarType out_dtype, double grad_scale, double weight_decay) {
  SCOPED_TRACE(::testing::Message() << "n=" << n << " offset=" << offset << " out=" << c10::toString(out_dtype)
                                    << " grad_scale=" << grad_scale << " wd=" << weight_decay);
  torch::manual_seed(n + offset);
  auto o = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat32);
  const Buffers fused = make_buffers(n, offset, o);
  const Buffers ref = clone(fused);
  const auto runs = some_runs(n);
  const torch::Tensor chunks = optim::adam_chunk_table(runs, n).to(torch::kCUDA);  // [C, 3]
  torch::Tensor out = torch::empty({n + offset}, o.dtype(out_dtype)).narrow(0, offset, n);
  optim::AdamScalars s;
  kernels::AdamHyper& h = s.hyper;
  h.lr = 3e-3, h.beta1 = 0.9, h.beta2 = 0.95, h.eps = 1e-8, h.weight_decay = weight_decay, h.grad_scale = grad_scale;
  for (int step = 1; step <= 4; ++step) {
    h.bias_correction1 = 1.0 - std::pow(h.beta1, step);
    h.bias_correction2 = 1.0 - std::pow(h.beta2, step);
    torch::Tensor g = torch::randn({n + offset}, o).narrow(0, offset, n);  // [n]
    torch::Tensor g_ref = g.clone();
    optim::adam_step_aten(ref.master, ref.m, ref.v, g_ref, runs, s);
    optim::adam_step_fused(fused.master, fused.m, fused.v, g, chunks, s, out);
    EXPECT_LT(rel_err(fused.m, ref.m), 1e-6) << "step " << step;
    EXPECT_LT(rel_err(fused.v, ref.v), 1e-6) << "step " << step;
    EXPECT_TRUE(torch::allclose(fused.master, ref.master, 1e-6, 1e-7))
        << "step " << step << ": max diff " << (fused.master - ref.master).abs().max().item<double>();
    EXPECT_TRUE(torch::equal(out, fused.master.to(out_dtype))) << "step " << step;
  }
}

}  // namespace

TEST(KernelsAdam, ChunkTableCoversTheBufferInOrder) {
  const int64_t n = 200003, chunk = 65536;
  const std::vector<optim::Run> runs{{3, 10}, {20, 150000}, {200000, 3}};
  const torch::Tensor t = optim::adam_chunk_table(runs, n, chunk);  // [C, 3]
  ASSERT_EQ(t.dim(), 2);
  ASSERT_EQ(t.size(1), 3);
  std::vector<char> decays(n, 0);
  for (const auto& r : runs) std::fill(decays.begin() + r.offset, decays.begin() + r.offset + r.numel, 1);
  const auto a = t.accessor<int64_t, 2>();
  int64_t at = 0;
  for (int64_t c = 0; c < t.size(0); ++c) {
    EXPECT_EQ(a[c][0], at) << "chunk " << c;
    EXPECT_GT(a[c][1], 0);
    EXPECT_LE(a[c][1], chunk);
    for (int64_t i = a[c][0]; i < a[c][0] + a[c][1]; ++i) ASSERT_EQ(decays[i], a[c][2]) << "element " << i;
    at += a[c][1];
  }
  EXPECT_EQ(at, n);
  // [0,3) [3,13) [13,20) [20,150020) in 3 chunks, [150020,200000), [200000,200003): 8 chunks.
  EXPECT_EQ(t.size(0), 8);
  EXPECT_EQ(optim::adam_chunk_table({}, 0).size(0), 0);
  const torch::Tensor none = optim::adam_chunk_table({}, 7);
  EXPECT_TRUE(torch::equal(none, torch::tensor({0, 7, 0}, torch::kInt64).view({1, 3})));
}

TEST(KernelsAdam, FusedMatchesAtenFp32) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (int64_t n : {1, 7, 65537, 1000003}) {
    compare(n, 0, torch::kFloat32, 1.0, 0.1);   // aligned buffers: float4 body, scalar head/tail per chunk
    compare(n, 1, torch::kFloat32, 0.37, 0.1);  // unaligned buffers: all scalar; a clip coefficient
  }
  compare(65537, 0, torch::kFloat32, 1.0, 0.0);  // no weight decay
}

TEST(KernelsAdam, EveryTuningGivesTheSameBits) {
  // packs_per_pass 2 and 4 against 1: the same arithmetic per element, only the loads' grouping differs. Sizes with a
  // partial last pass and a scalar head/tail per chunk (65537, 1000003), a bf16 output, decay on part of the buffer.
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto o = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat32);
  for (int64_t n : {7, 65537, 1000003}) {
    torch::manual_seed(n);
    const Buffers base = make_buffers(n, 0, o);
    const torch::Tensor g = torch::randn({n}, o);                                            // [n]
    const torch::Tensor chunks = optim::adam_chunk_table(some_runs(n), n).to(torch::kCUDA);  // [C, 3]
    optim::AdamScalars s;
    kernels::AdamHyper& h = s.hyper;
    h.lr = 3e-3, h.beta1 = 0.9, h.beta2 = 0.95, h.eps = 1e-8, h.weight_decay = 0.1, h.grad_scale = 0.37;
    h.bias_correction1 = 0.1, h.bias_correction2 = 0.05;
    auto run = [&](int packs) {
      Buffers b = clone(base);
      torch::Tensor out = torch::empty({n}, o.dtype(torch::kBFloat16));
      optim::adam_step_fused(b.master, b.m, b.v, g, chunks, s, out, packs);
      return std::vector<torch::Tensor>{b.master, b.m, b.v, out};
    };
    const auto want = run(1);
    for (int packs : {2, 4}) {
      const auto got = run(packs);
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_TRUE(torch::equal(got[i], want[i])) << "n=" << n << " packs=" << packs << " buffer " << i;
    }
  }
  // A split the kernel has no instance for is refused, naming it.
  const Buffers b = make_buffers(8, 0, o);
  optim::AdamScalars s;
  try {
    optim::adam_step_fused(b.master, b.m, b.v, torch::zeros({8}, o), optim::adam_chunk_table({}, 8).to(torch::kCUDA), s,
                           {}, 3);
    ADD_FAILURE() << "packs_per_pass 3 accepted";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("packs_per_pass must be 1, 2 or 4, got 3"), std::string::npos) << e.what();
  }
}

TEST(KernelsAdam, FusedWritesRoundedParameters) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (int64_t n : {7, 65537, 1000003}) {
    compare(n, 0, torch::kBFloat16, 0.37, 0.1);
    compare(n, 2, torch::kBFloat16, 1.0, 0.1);  // every buffer 2 elements off a 16-byte boundary: scalar path
    compare(n, 0, torch::kFloat16, 0.37, 0.1);
  }
}

namespace {

// Five parameters of odd sizes on `device` in `dtype`, every other one without weight decay.
parallel::ParamList odd_params(const torch::Device& device, torch::ScalarType dtype, uint64_t seed) {
  torch::manual_seed(seed);
  parallel::ParamList ps;
  const std::vector<int64_t> sizes{1, 7, 65537, 1000003, 5};
  for (size_t i = 0; i < sizes.size(); ++i) {
    parallel::ParamInfo p;
    p.name = "p" + std::to_string(i);
    p.param = torch::randn({sizes[i]}, device).to(dtype).set_requires_grad(true);
    p.global_shape = {sizes[i]};
    p.no_weight_decay = i % 2 == 0;
    ps.push_back(p);
  }
  return ps;
}

// The optimizer on a bf16 CUDA model: the fused path (clip folded into the kernel, parameters written by it, no copy)
// against --no-fused-adam, several steps with clipping active; with the zero count on, the clip stays a pass.
void compare_optimizers(bool count_zeros) {
  SCOPED_TRACE(count_zeros ? "counting zeros" : "not counting zeros");
  auto make_params = [] { return odd_params(torch::kCUDA, torch::kBFloat16, 3); };
  auto groups_f = optimtest::self_groups(), groups_a = optimtest::self_groups();
  auto params_f = make_params(), params_a = make_params();
  parallel::DataParallel dp_f(params_f, groups_f, {}), dp_a(params_a, groups_a, {});
  optim::OptimizerOptions o;
  o.lr = 1e-2;
  o.weight_decay = 0.1;
  o.clip_grad = 1.0;  // the random grads' norm is ~1000: every step clips
  o.log_num_zeros_in_grad = count_zeros;
  optim::OptimizerOptions o_aten = o;
  o_aten.use_fused_adam = false;
  optim::MixedPrecisionOptimizer fused(dp_f, groups_f, o, nullptr), aten(dp_a, groups_a, o_aten, nullptr);
  for (int step = 0; step < 4; ++step) {
    torch::Tensor g = torch::randn({dp_f.grad_buffer().numel()}, torch::kCUDA);  // [N]
    g.narrow(0, 0, 100).zero_();
    dp_f.grad_buffer().copy_(g);
    dp_a.grad_buffer().copy_(g);
    const auto rf = fused.step(), ra = aten.step();
    ASSERT_TRUE(rf.updated && ra.updated);
    EXPECT_DOUBLE_EQ(*rf.grad_norm, *ra.grad_norm);
    ASSERT_EQ(rf.num_zeros.has_value(), ra.num_zeros.has_value());
    if (rf.num_zeros) EXPECT_EQ(*rf.num_zeros, *ra.num_zeros);
    EXPECT_LT(rel_err(fused.master_shard(), aten.master_shard()), 1e-6) << "step " << step;
    // The kernel wrote the parameters: exactly the rounded masters.
    EXPECT_TRUE(torch::equal(dp_f.param_buffer(), fused.master_shard().to(torch::kBFloat16))) << "step " << step;
  }
  EXPECT_EQ(fused.step_count(), 4);
}

}  // namespace

TEST(KernelsAdam, OptimizerFusedMatchesAten) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  compare_optimizers(false);
  compare_optimizers(true);
}
