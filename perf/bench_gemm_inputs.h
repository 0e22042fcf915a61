// Random bf16 operands on the GPU for the layer GEMMs that bench_gemm_algos.cpp and bench_gemm_sustained.cpp time:
// a weight gradient into an fp32 main grad, fc1 + GELU (GELU_AUX_BIAS) and fc2's input gradient through the GELU
// (DGELU). T: tokens (micro-batch x seq), h: hidden, f = 4h.
#pragma once
#ifdef MEGATON_HAVE_CUDA
#include <torch/torch.h>

#include <cstdint>

namespace megaton::perf {

inline torch::TensorOptions bf16_cuda() {
  return torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
}

/// main [out, in] (fp32, zeros) = dy^T x: dy [T, out], x [T, in].
struct WgradInputs {
  torch::Tensor dy, x, main;
  WgradInputs(int64_t in, int64_t out, int64_t tokens)
      : dy(torch::randn({tokens, out}, bf16_cuda())),
        x(torch::randn({tokens, in}, bf16_cuda())),
        main(torch::zeros({out, in}, bf16_cuda().dtype(torch::kFloat32))) {}
};

/// act, pre [T, f] from x [T, h], w [f, h], b [f].
struct GeluAuxInputs {
  torch::Tensor x, w, b, act, pre;
  GeluAuxInputs(int64_t tokens, int64_t h)
      : x(torch::randn({tokens, h}, bf16_cuda())),
        w(torch::randn({4 * h, h}, bf16_cuda()) * 0.02),
        b(torch::randn({4 * h}, bf16_cuda()) * 0.02),
        act(torch::empty({tokens, 4 * h}, bf16_cuda())),
        pre(torch::empty_like(act)) {}
  double flops() const { return 2.0 * double(x.numel()) * double(w.size(0)); }
};

/// d_pre [T, f] from dy [T, h], w [h, f], pre [T, f].
struct DgeluInputs {
  torch::Tensor dy, w, pre, d_pre;
  DgeluInputs(int64_t tokens, int64_t h)
      : dy(torch::randn({tokens, h}, bf16_cuda())),
        w(torch::randn({h, 4 * h}, bf16_cuda()) * 0.02),
        pre(torch::randn({tokens, 4 * h}, bf16_cuda())),
        d_pre(torch::empty_like(pre)) {}
  double flops() const { return 2.0 * double(dy.numel()) * double(w.size(1)); }
};

}  // namespace megaton::perf
#endif
