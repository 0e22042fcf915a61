// ops::set_gemm_sm_carveout: the calling thread's cuBLAS GEMMs target all but N SMs, and no other thread's; back to
// every SM with 0; a carveout of every SM refused. On the CPU a no-op.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <thread>

#include "core/error.h"
#include "ops/gemm_sm_carveout.h"

using namespace megaton;

TEST(GemmSmCarveout, CpuIsANoOp) {
  const torch::Device cpu(torch::kCPU);
  ops::set_gemm_sm_carveout(cpu, 8);
  EXPECT_EQ(ops::gemm_sm_target(cpu), 0);
}

TEST(KernelsGemmSmCarveout, TargetsTheCallingThreadsGemmsOnly) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const torch::Device gpu(torch::kCUDA, 0);
  auto bf16 = torch::TensorOptions().device(gpu).dtype(torch::kBFloat16);
  const torch::Tensor a = torch::randn({4096, 1024}, bf16), b = torch::randn({1024, 2048}, bf16);
  const torch::Tensor all_sms = at::mm(a, b);  // [4096, 2048]
  ops::set_gemm_sm_carveout(gpu, 16);
  const int sms = ops::gemm_sm_target(gpu) + 16;  // the target: all but 16 of the GPU's SMs
  EXPECT_GT(sms, 16);
  int other_thread = -1;
  std::thread([&] { other_thread = ops::gemm_sm_target(gpu); }).join();
  EXPECT_EQ(other_thread, 0);
  const torch::Tensor fewer_sms = at::mm(a, b);  // possibly another kernel: equal to bf16 rounding
  EXPECT_TRUE(torch::allclose(fewer_sms.to(torch::kFloat32), all_sms.to(torch::kFloat32), 1e-2, 1e-2));
  EXPECT_THROW(ops::set_gemm_sm_carveout(gpu, sms), UsageError);
  ops::set_gemm_sm_carveout(gpu, 0);
  EXPECT_EQ(ops::gemm_sm_target(gpu), 0);
}
