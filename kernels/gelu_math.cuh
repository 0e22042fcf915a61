// The tanh GELU's derivative on the device (included by .cu files only), in fp32 and in the order of ATen's
// GeluBackwardCUDAKernelImpl (approximate="tanh"):
//   inner = beta (x + kappa x^3), beta = sqrt(2/pi), kappa = 0.044715;  t = tanh(inner)
//   d_pre = d_act * (0.5 (1 + t) + 0.5 x (1 - t^2) beta (1 + 3 kappa x^2))
#pragma once

namespace megaton::kernels::util {

__device__ __forceinline__ float gelu_tanh_grad(float dy, float x) {
  constexpr float kBeta = 0.7978845608028654f;  // M_SQRT2 * M_2_SQRTPI * 0.5
  constexpr float kKappa = 0.044715f;
  const float x_sq = x * x;
  const float x_cube = x_sq * x;
  const float inner = kBeta * (x + kKappa * x_cube);
  const float tanh_inner = tanhf(inner);
  const float left = 0.5f * x;
  const float right = 1.0f + tanh_inner;
  const float left_derivative = 0.5f * right;
  const float tanh_derivative = 1.0f - tanh_inner * tanh_inner;
  const float inner_derivative = kBeta * (1.0f + 3.0f * kKappa * x_sq);
  const float right_derivative = left * tanh_derivative * inner_derivative;
  return dy * (left_derivative + right_derivative);
}

}  // namespace megaton::kernels::util
