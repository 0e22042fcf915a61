// bitsandbytes' blockwise 8-bit Adam update (optim::BlockwiseAdam8bit, --use-bnb-optimizer) in one kernel: one
// thread block per quantization block of up to kAdam8bitBlock elements reads the gradient, the two code rows and
// absmaxes and the masters once, and writes the masters, the new codes and absmaxes once. Every fp32 operation is
// the ATen path's, one rounding each (no fused multiply-adds): the same codes and absmaxes, and the same masters
// where the LibTorch build rounds the ATen ops one at a time (Debian's 1.13 does; a 2.x build on AVX-512 differs in
// the masters' last bit):
//   m = (map1[c1] * absmax1) * b1 + g * (1 - b1);   v = (map2[c2] * absmax2) * b2 + (g * g) * (1 - b2)
//   absmax1' = max |m|, absmax2' = max v over the block (NaN propagates, as ATen's amax)
//   p = p + (m / (sqrt(v) + eps_c2)) * step_size;  then p * decay_factor where the block decays
//   c1' = bitsandbytes' quantize_2D(map1, m / absmax1') with its sign rule, c2' = quantize_2D(map2, v / absmax2')
// Padding lanes of a short block get the codes of 0 / absmax'.
// Plain CUDA (no torch headers); src/optim/adam8bit_cuda.cpp wraps it.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace megaton::kernels {

constexpr int kAdam8bitBlock = 2048;

struct Adam8bitScalars {
  float beta1, beta2, one_minus_beta1, one_minus_beta2;
  float eps_c2;        // eps * sqrt(1 - beta2^t)
  float step_size;     // -lr * sqrt(1 - beta2^t) / (1 - beta1^t)
  float decay_factor;  // 1 - lr * weight_decay
  bool weight_decay;   // weight_decay > 0
};

/// codes1/codes2: [num_blocks, kAdam8bitBlock] uint8; absmax1/absmax2: [num_blocks]; map1/map2: [256] (signed,
/// unsigned); block_start/block_len: [num_blocks] offsets into master/grad and lengths (1..kAdam8bitBlock);
/// block_decay: [num_blocks]. Throws std::runtime_error when the launch fails.
void adam8bit_step(float* master, const float* grad, uint8_t* codes1, uint8_t* codes2, float* absmax1, float* absmax2,
                   const float* map1, const float* map2, const int64_t* block_start, const int64_t* block_len,
                   const bool* block_decay, int64_t num_blocks, const Adam8bitScalars& s, cudaStream_t stream);

}  // namespace megaton::kernels
