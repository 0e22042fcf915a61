// The 8-bit Adam's CUDA kernel (kernels/adam8bit_kernels.cu) against its ATen path on the CPU: moments (codes x
// absmax) bit for bit and masters to an ulp or two, after several steps with changing gradient scales, a block without
// gradient, partial blocks, blocks without weight decay and fp32-state parameters. Skipped without a CUDA device.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "optim/adam8bit.h"
#include "optim/adam8bit_test_util.h"

using namespace megaton;

TEST(KernelsAdam8bit, CudaMatchesTheAtenPathBitForBit) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  parallel::ParamList ps;
  const std::vector<std::pair<int64_t, bool>> sizes = {{6000, false}, {3000, false}, {4096, true}, {700000, false}};
  for (size_t i = 0; i < sizes.size(); ++i) {
    parallel::ParamInfo p;
    p.name = "p" + std::to_string(i);
    p.param = torch::zeros({sizes[i].first});
    p.no_weight_decay = sizes[i].second;
    ps.push_back(p);
  }
  const auto pieces = optimtest::whole_pieces(ps);
  const int64_t at = pieces.back().buffer_offset + pieces.back().numel;
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
  optim::BlockwiseAdam8bit cpu(pieces, ps, at, f32), gpu(pieces, ps, at, f32.device(torch::kCUDA));
  torch::manual_seed(7);
  torch::Tensor p_cpu = torch::randn({at}), p_gpu = p_cpu.cuda();
  for (int step = 1; step <= 5; ++step) {
    torch::Tensor g = torch::randn({at}) * (step % 2 ? 1.0 : 1e-3);
    if (step == 3) g.narrow(0, 100, 4000).zero_();
    const optim::AdamScalars s = optimtest::adam8bit_scalars(step);
    cpu.step(p_cpu, g, s);
    gpu.step(p_gpu, g.cuda(), s);
    // Masters to an ulp or two (LibTorch builds round the CPU path's p + (m / d) * step differently), codes and
    // moments bit for bit.
    EXPECT_TRUE(torch::allclose(p_cpu, p_gpu.cpu(), 1e-6, 1e-7))
        << "step " << step << ": max difference " << (p_cpu - p_gpu.cpu()).abs().max().item<float>();
    EXPECT_TRUE(torch::equal(cpu.exp_avg(), gpu.exp_avg().cpu())) << "step " << step;
    EXPECT_TRUE(torch::equal(cpu.exp_avg_sq(), gpu.exp_avg_sq().cpu())) << "step " << step;
  }
}
