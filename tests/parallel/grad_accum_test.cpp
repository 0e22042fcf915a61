// parallel::accumulate_main_grad, the fold of a parameter's gradient into its fp32 main grad: on CUDA tensors the
// vectorised kernel (kernels/grad_accum_kernels.cu) must give exactly ATen's `main.add_(grad)` (one fp32 addition of
// the converted value per element) for bf16, fp16 and fp32 gradients, at sizes with and without a vector tail and at
// offsets that break 16-byte alignment; non-contiguous gradients take ATen's path. The CPU path is ATen's add_ itself.
#include "parallel/data/grad_accum.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

using namespace megaton;

namespace {

// main[offset:offset+n] += grad[goffset:goffset+n] by accumulate_main_grad and by ATen; returns max |difference|.
double mismatch(torch::Device device, torch::ScalarType gtype, int64_t n, int64_t offset, int64_t goffset) {
  torch::manual_seed(n + offset * 7 + goffset * 13);
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  torch::Tensor base = torch::randn({n + offset}, f32);
  torch::Tensor grad = torch::randn({n + goffset}, f32).to(gtype).narrow(0, goffset, n);
  torch::Tensor ours = base.clone(), theirs = base.clone();
  torch::Tensor ours_view = ours.narrow(0, offset, n);
  parallel::accumulate_main_grad(ours_view, grad);
  theirs.narrow(0, offset, n).add_(grad);
  return (ours - theirs).abs().max().item<double>();
}

}  // namespace

TEST(KernelsGradAccum, CpuIsAtenAdd) {
  for (auto t : {torch::kFloat32, torch::kBFloat16})
    EXPECT_EQ(mismatch(torch::kCPU, t, 1000, 3, 1), 0.0) << c10::toString(t);
}

TEST(KernelsGradAccum, CudaMatchesAtenExactly) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (auto t : {torch::kBFloat16, torch::kFloat16, torch::kFloat32})
    for (int64_t n : {1, 7, 8, 9, 4096, 1000003})
      for (auto [offset, goffset] : {std::pair<int64_t, int64_t>{0, 0}, {1, 0}, {0, 3}, {4, 8}})
        EXPECT_EQ(mismatch(torch::kCUDA, t, n, offset, goffset), 0.0)
            << c10::toString(t) << " n=" << n << " main offset " << offset << " grad offset " << goffset;
}

TEST(KernelsGradAccum, CudaNonContiguousGradientTakesAtenPath) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA);
  torch::Tensor main = torch::randn({64, 32}, opts);
  torch::Tensor grad = torch::randn({32, 64}, opts).to(torch::kBFloat16).t();  // [64, 32], transposed strides
  torch::Tensor expected = main + grad.to(torch::kFloat32);
  parallel::accumulate_main_grad(main, grad);
  EXPECT_EQ((main - expected).abs().max().item<double>(), 0.0);
}
