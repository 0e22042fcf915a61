// Fused Adam (kernels/adam_kernels.h): one thread block per chunk of the table; inside a chunk 16-byte (float4) loads
// and stores from the first multiple of 4 on when every buffer is aligned, scalar code for the head and tail.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "adam_kernels.h"
#include "kernel_util.cuh"

namespace megaton::kernels {

namespace {

using util::check;
using util::from_float;
using util::to_float;

constexpr int kThreads = 256;
constexpr int kVec = 4;  // floats per 16-byte load

// The fp32 scalars the kernel uses, rounded from AdamHyper's doubles where ATen rounds them.
struct Consts {
  float beta1, beta2;
  float one_minus_beta1, one_minus_beta2;
  float decay_keep;    // 1 - lr * weight_decay
  float inv_sqrt_bc2;  // 1 / sqrt(bias_correction2), as ATen's division by a scalar (a multiply by its inverse)
  float eps;
  float neg_step;                  // -lr / bias_correction1
  float grad_scale;                // the clip coefficient
  const float* device_grad_scale;  // not null: read grad_scale from here
};

// One element. The explicit _rn intrinsics keep nvcc from contracting across what are separate ATen kernels (each
// rounds its result to fp32); inside one ATen kernel (add with alpha, addcmul, addcdiv) the fma is ATen's own.
__device__ __forceinline__ void adam_element(float& p, float& m, float& v, float g, const Consts& c, bool decay) {
  g = __fmul_rn(g, c.grad_scale);                                                  // g.mul_(coeff)
  m = __fmaf_rn(c.one_minus_beta1, g, __fmul_rn(m, c.beta1));                      // m.mul_(b1).add_(g, 1 - b1)
  v = __fmaf_rn(__fmul_rn(c.one_minus_beta2, g), g, __fmul_rn(v, c.beta2));        // v.mul_(b2).addcmul_(g, g, 1 - b2)
  if (decay) p = __fmul_rn(p, c.decay_keep);                                       // p.mul_(1 - lr * wd)
  const float denom = __fadd_rn(__fmul_rn(__fsqrt_rn(v), c.inv_sqrt_bc2), c.eps);  // sqrt(v) / sqrt(bc2) + eps
  p = __fmaf_rn(c.neg_step, __fdiv_rn(m, denom), p);                               // p.addcdiv_(m, denom, -lr / bc1)
}

// VEC elements of T in one aligned load/store.
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Pack {
  T v[VEC];
};

template <typename P>
__device__ __forceinline__ void scalar_range(float* __restrict__ master, float* __restrict__ m, float* __restrict__ v,
                                             const float* __restrict__ g, P* __restrict__ out, int64_t begin,
                                             int64_t end, const Consts& c, bool decay) {
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    float pi = master[i], mi = m[i], vi = v[i];
    adam_element(pi, mi, vi, g[i], c, decay);
    master[i] = pi;
    m[i] = mi;
    v[i] = vi;
    if (out != nullptr) out[i] = from_float<P>(pi);
  }
}

// P: param_out's element type (float when there is none: out == nullptr). vec: every buffer is 16-byte aligned
// (param_out: aligned to 4 elements), so elements from a multiple of 4 on can move in packs of 4. U: packs per thread
// per pass, loaded together before any is computed (more bytes in flight per thread); pass j of thread t takes packs j
// U blockDim.x + t + u blockDim.x, u < U, so a warp's loads stay contiguous.
template <typename P, int U>
__global__ void __launch_bounds__(kThreads)
    adam_kernel(float* __restrict__ master, float* __restrict__ m, float* __restrict__ v, const float* __restrict__ g,
                P* __restrict__ out, const AdamChunk* __restrict__ chunks, Consts consts, bool vec) {
  Consts c = consts;
  if (c.device_grad_scale != nullptr) c.grad_scale = *c.device_grad_scale;
  const AdamChunk ch = chunks[blockIdx.x];
  const bool decay = ch.decay != 0;
  int64_t begin = ch.start;
  const int64_t end = ch.start + ch.len;
  if (vec) {
    const int64_t head = (kVec - begin % kVec) % kVec;
    const int64_t body = begin + head < end ? begin + head : end;
    scalar_range(master, m, v, g, out, begin, body, c, decay);  // head: up to 3 elements before a multiple of 4
    const int64_t packs = (end - body) / kVec;
    for (int64_t k0 = threadIdx.x; k0 < packs; k0 += static_cast<int64_t>(U) * blockDim.x) {
      float4 p4[U], m4[U], v4[U], g4[U];
      int64_t at[U];  // each pack's first element, or -1 past the chunk's packs
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t k = k0 + static_cast<int64_t>(u) * blockDim.x;
        at[u] = k < packs ? body + k * kVec : -1;
        if (at[u] < 0) continue;
        const int64_t i = at[u];
        p4[u] = *reinterpret_cast<const float4*>(master + i), m4[u] = *reinterpret_cast<const float4*>(m + i);
        v4[u] = *reinterpret_cast<const float4*>(v + i), g4[u] = *reinterpret_cast<const float4*>(g + i);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (at[u] < 0) continue;
        const int64_t i = at[u];
        adam_element(p4[u].x, m4[u].x, v4[u].x, g4[u].x, c, decay);
        adam_element(p4[u].y, m4[u].y, v4[u].y, g4[u].y, c, decay);
        adam_element(p4[u].z, m4[u].z, v4[u].z, g4[u].z, c, decay);
        adam_element(p4[u].w, m4[u].w, v4[u].w, g4[u].w, c, decay);
        *reinterpret_cast<float4*>(master + i) = p4[u];
        *reinterpret_cast<float4*>(m + i) = m4[u];
        *reinterpret_cast<float4*>(v + i) = v4[u];
        if (out != nullptr) {
          Pack<P, kVec> o;
          o.v[0] = from_float<P>(p4[u].x), o.v[1] = from_float<P>(p4[u].y), o.v[2] = from_float<P>(p4[u].z),
          o.v[3] = from_float<P>(p4[u].w);
          *reinterpret_cast<Pack<P, kVec>*>(out + i) = o;
        }
      }
    }
    begin = body + packs * kVec;  // tail: up to 3 elements
  }
  scalar_range(master, m, v, g, out, begin, end, c, decay);
}

bool aligned(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

template <typename P>
void launch(float* master, float* m, float* v, const float* g, void* out, const AdamChunk* chunks, int64_t n,
            const Consts& c, const AdamTuning& tuning, cudaStream_t stream) {
  P* o = static_cast<P*>(out);
  const bool vec = aligned(master, 16) && aligned(m, 16) && aligned(v, 16) && aligned(g, 16) &&
                   (o == nullptr || aligned(o, sizeof(P) * kVec));
  const auto blocks = static_cast<unsigned>(n);
  switch (tuning.packs_per_pass) {
    case 1:
      adam_kernel<P, 1><<<blocks, kThreads, 0, stream>>>(master, m, v, g, o, chunks, c, vec);
      break;
    case 2:
      adam_kernel<P, 2><<<blocks, kThreads, 0, stream>>>(master, m, v, g, o, chunks, c, vec);
      break;
    case 4:
      adam_kernel<P, 4><<<blocks, kThreads, 0, stream>>>(master, m, v, g, o, chunks, c, vec);
      break;
    default:
      throw std::invalid_argument("adam_step: packs_per_pass must be 1, 2 or 4, got " +
                                  std::to_string(tuning.packs_per_pass));
  }
}

}  // namespace

void adam_step(float* master, float* exp_avg, float* exp_avg_sq, const float* grad, const AdamChunk* chunks,
               int64_t num_chunks, const AdamHyper& h, void* param_out, FloatType param_type, cudaStream_t stream,
               const AdamTuning& tuning) {
  if (num_chunks == 0) return;
  if (num_chunks > INT_MAX) throw std::runtime_error("adam_step: more than INT_MAX chunks");
  Consts c;
  c.beta1 = static_cast<float>(h.beta1);
  c.beta2 = static_cast<float>(h.beta2);
  c.one_minus_beta1 = static_cast<float>(1.0 - h.beta1);
  c.one_minus_beta2 = static_cast<float>(1.0 - h.beta2);
  c.decay_keep = static_cast<float>(1.0 - h.lr * h.weight_decay);
  c.inv_sqrt_bc2 = 1.0f / static_cast<float>(std::sqrt(h.bias_correction2));
  c.eps = static_cast<float>(h.eps);
  c.neg_step = static_cast<float>(-h.lr / h.bias_correction1);
  c.grad_scale = static_cast<float>(h.grad_scale);
  c.device_grad_scale = h.device_grad_scale;
  if (param_out == nullptr) {
    launch<float>(master, exp_avg, exp_avg_sq, grad, nullptr, chunks, num_chunks, c, tuning, stream);
  } else {
    switch (param_type) {
      case FloatType::kFloat32:
        launch<float>(master, exp_avg, exp_avg_sq, grad, param_out, chunks, num_chunks, c, tuning, stream);
        break;
      case FloatType::kBFloat16:
        launch<__nv_bfloat16>(master, exp_avg, exp_avg_sq, grad, param_out, chunks, num_chunks, c, tuning, stream);
        break;
      case FloatType::kFloat16:
        launch<__half>(master, exp_avg, exp_avg_sq, grad, param_out, chunks, num_chunks, c, tuning, stream);
        break;
    }
  }
  check(cudaGetLastError(), "adam_step launch");
}

}  // namespace megaton::kernels
