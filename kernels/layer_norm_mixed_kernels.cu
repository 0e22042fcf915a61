// LayerNorm kernels for an fp32 residual stream in a 16-bit model (kernels/layer_norm_mixed_kernels.h). The scheme is
// layer_norm_kernels.cu's (a warp or a group of warps per row, each thread owning the same vectors of every row, the
// backward's dgamma/dbeta summed per thread in registers into per-block partials), with 8-element vectors: a 16-bit
// vector is one 16-byte load, an fp32 one two. The backward is the plain one (one row per pass, the residual
// gradient read after the reduction), without the staged ring of the one-type kernels.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "layer_norm_common.cuh"
#include "layer_norm_mixed_kernels.h"

namespace megaton::kernels {

namespace {

using namespace layer_norm_detail;

constexpr int kElems = 8;       // elements per vector
constexpr int kMaxFloats = 32;  // elements per thread per row at most (P <= 4 vectors)

// Eight elements: 16 bytes of a 16-bit type, 32 of fp32 (two 16-byte loads or stores).
template <typename T>
struct alignas(16) Vec8 {
  T v[kElems];
};

// x [rows, h] (kRes: the model type W, the branch; else fp32), res and sum [rows, h] fp32 (kRes), gamma, beta [h] and
// y [rows, h] of W; mean, rstd [rows]. Two-pass statistics from the thread's P vectors kept in registers, as
// layer_norm_kernels.cu's forward_kernel. kDrop (kRes): x dropped out before the add, its keep bits written.
template <typename W, int P, bool kWarp, bool kRes, bool kDrop>
__global__ void __launch_bounds__(kMaxThreads, P* kElems > 24 ? 1 : 2)
    mixed_forward_kernel(const void* __restrict__ x_in, const float* __restrict__ res, float* __restrict__ sum,
                         const W* __restrict__ gamma, const W* __restrict__ beta, W* __restrict__ y,
                         float* __restrict__ mean, float* __restrict__ rstd, int64_t rows, int h, int group, float eps,
                         DropArgs drop) {
  static_assert(!kDrop || kRes, "the dropout is drawn on the added branch");
  using X = std::conditional_t<kRes, W, float>;  // x's element type
  const X* x = static_cast<const X*>(x_in);
  PhiloxKey pkey{};
  if constexpr (kDrop) pkey = philox_key(drop.philox);
  __shared__ float red[2 * kMaxWarps];
  const int units = h / kElems, rows_per_block = blockDim.x / group;
  const int g = threadIdx.x / group, t = threadIdx.x - g * group;
  const float inv_h = 1.f / static_cast<float>(h);
  const auto* gp = reinterpret_cast<const Pack<W>*>(gamma);  // [units] (Pack<W>: 8 elements, as Vec8<W>)
  const auto* bp = reinterpret_cast<const Pack<W>*>(beta);   // [units]
  int phase = 0;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * rows_per_block + g; r < rows;
       r += static_cast<int64_t>(gridDim.x) * rows_per_block) {
    const int64_t off = r * h;
    const auto* xr = reinterpret_cast<const Vec8<X>*>(x + off);  // [units]
    float v[P][kElems];
    float stat[1] = {0.f};
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const int p = t + i * group;
      if (p < units) {
        Vec8<X> xk = xr[p];
        if constexpr (kRes) {
          if constexpr (kDrop) {  // rounded to W as ATen's dropout rounds it, then upcast exactly
            const int64_t q = off / kElems + p;
            const uint32_t bits = keep_bits8(pkey, static_cast<uint64_t>(q), drop.threshold);
            drop.keep[q] = static_cast<uint8_t>(bits);
            drop_scale<W>(xk.v, bits, drop.scale, xk.v);
          }
          const Vec8<float> rk = reinterpret_cast<const Vec8<float>*>(res + off)[p];
          Vec8<float> sk;
#pragma unroll
          for (int k = 0; k < kElems; ++k) sk.v[k] = rk.v[k] + to_float(xk.v[k]);
          reinterpret_cast<Vec8<float>*>(sum + off)[p] = sk;
#pragma unroll
          for (int k = 0; k < kElems; ++k) v[i][k] = sk.v[k];
        } else {
#pragma unroll
          for (int k = 0; k < kElems; ++k) v[i][k] = xk.v[k];
        }
#pragma unroll
        for (int k = 0; k < kElems; ++k) stat[0] += v[i][k];
      } else {
#pragma unroll
        for (int k = 0; k < kElems; ++k) v[i][k] = 0.f;
      }
    }
    normalize_row<W, P, kWarp>(v, stat, gp, bp, reinterpret_cast<Pack<W>*>(y + off), mean, rstd, r, units, t, group,
                               inv_h, eps, red, phase);
  }
}

// dy [rows, h] of W; x, dx, dres [rows, h] fp32; gamma [h] of W; mean, rstd [rows]; part [2, gridDim.x, h] fp32.
// One row per pass: x and dy of the row are loaded, one reduction of the two row sums, then the residual gradient is
// read and dx written (the one-type kernel's early load of it spills here, where x and it are fp32). kBranch: dxb =
// round(dx) to W is written too; kDrop: through the keep bits (ResidualDropoutGrad's rule).
template <typename W, int P, bool kWarp, bool kBranch, bool kDrop>
__global__ void __launch_bounds__(kMaxThreads, P* kElems <= 8 ? 2 : 1)  // <= 64 registers at 8 elements per thread
    mixed_backward_kernel(const W* __restrict__ dy, const float* __restrict__ x, const W* __restrict__ gamma,
                          const float* __restrict__ mean, const float* __restrict__ rstd,
                          const float* __restrict__ dres, float* __restrict__ dx, W* __restrict__ dxb,
                          const uint8_t* __restrict__ keep, float scale, float* __restrict__ part, int64_t rows, int h,
                          int group) {
  static_assert(!kDrop || kBranch, "the dropout's gradient is the branch's");
  extern __shared__ float fold[];  // [2, h] when rows_per_block > 1
  __shared__ float red[2 * 2 * kMaxWarps];
  const int units = h / kElems, rows_per_block = blockDim.x / group;
  const int g = threadIdx.x / group, t = threadIdx.x - g * group;
  const float inv_h = 1.f / static_cast<float>(h);
  const auto* gp = reinterpret_cast<const Vec8<W>*>(gamma);  // [units]
  constexpr bool kGammaCached = P * kElems <= 16;            // beyond, each use reads gamma again (from L1)
  // x and dy stay in registers between the two halves up to 16 elements per thread; beyond, the second half reads
  // them again (from L1/L2: they were just read). The residual gradient is read in the second half.
  constexpr bool kCache = P * kElems <= 16;
  Vec8<W> gk[kGammaCached ? P : 1];
  if constexpr (kGammaCached) {
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const int p = t + i * group;
      if (p < units) gk[i] = gp[p];
    }
  }
  auto gamma_of = [&](int i, int p) -> Vec8<W> {
    if constexpr (kGammaCached) return gk[i];
    return gp[p];
  };
  float dg[P][kElems], db[P][kElems];  // this thread's columns, summed over its rows
#pragma unroll
  for (int i = 0; i < P; ++i) {
#pragma unroll
    for (int k = 0; k < kElems; ++k) dg[i][k] = db[i][k] = 0.f;
  }
  int phase = 0;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * rows_per_block + g; r < rows;
       r += static_cast<int64_t>(gridDim.x) * rows_per_block) {
    const int64_t off = r * h;
    const float mu = mean[r], rs = rstd[r];
    const auto* xr = reinterpret_cast<const Vec8<float>*>(x + off);  // [units]
    const auto* dyr = reinterpret_cast<const Vec8<W>*>(dy + off);    // [units]
    Vec8<float> xc[P];                                               // used where kCache (otherwise optimised away)
    Vec8<W> dc[P];
    uint32_t kb[kDrop ? P : 1];
    if constexpr (kCache) {
#pragma unroll
      for (int i = 0; i < P; ++i) {
        const int p = t + i * group;
        if (p < units) xc[i] = xr[p], dc[i] = dyr[p];
      }
    }
    float s[2] = {0.f, 0.f};  // sum g, sum g * xhat (g = dy * gamma)
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const int p = t + i * group;
      if (p >= units) continue;
      if constexpr (kDrop) kb[i] = keep[off / kElems + p];
      const Vec8<float> xk = kCache ? xc[i] : xr[p];
      const Vec8<W> dk = kCache ? dc[i] : dyr[p], gv = gamma_of(i, p);
#pragma unroll
      for (int k = 0; k < kElems; ++k) {
        const float xh = (xk.v[k] - mu) * rs, d = to_float(dk.v[k]);
        const float gd = d * to_float(gv.v[k]);
        s[0] += gd;
        s[1] += gd * xh;
        dg[i][k] += d * xh;
        db[i][k] += d;
      }
    }
    group_sum<2, kWarp>(s, red, group, phase);
    const float a = s[0] * inv_h, b = s[1] * inv_h;
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const int p = t + i * group;
      if (p >= units) continue;
      Vec8<float> o;
      if (dres != nullptr) {
        o = reinterpret_cast<const Vec8<float>*>(dres + off)[p];
      } else {
#pragma unroll
        for (int k = 0; k < kElems; ++k) o.v[k] = 0.f;
      }
      const Vec8<float> xk = kCache ? xc[i] : xr[p];
      const Vec8<W> dk = kCache ? dc[i] : dyr[p], gv = gamma_of(i, p);
#pragma unroll
      for (int k = 0; k < kElems; ++k) {
        const float xh = (xk.v[k] - mu) * rs;
        const float gd = to_float(dk.v[k]) * to_float(gv.v[k]);
        o.v[k] += rs * (gd - a - xh * b);
      }
      reinterpret_cast<Vec8<float>*>(dx + off)[p] = o;
      if constexpr (kBranch) {
        Vec8<W> ob;
#pragma unroll
        for (int k = 0; k < kElems; ++k) ob.v[k] = from_float<W>(o.v[k]);
        if constexpr (kDrop) drop_scale<W>(ob.v, kb[i], scale, ob.v);
        reinterpret_cast<Vec8<W>*>(dxb + off)[p] = ob;
      }
    }
  }
  write_partials<kElems, P>(dg, db, fold, part, h, units, group, rows_per_block, g, t);
}

// ~~~ host side ~~~

// Elements per thread as the tuning asks, at most kMaxFloats (so that P <= 4 for every supported width: h / 8 <=
// 2048 vectors over at most 512 threads).
LayerNormTuning clamped(const LayerNormTuning& tuning) {
  LayerNormTuning t = tuning;
  t.forward_floats = std::min(t.forward_floats, kMaxFloats);
  t.backward_floats = std::clamp(t.backward_floats, kElems, kMaxFloats);
  return t;
}

Config mixed_backward_config(int64_t h, const LayerNormTuning& tuning) {
  const LayerNormTuning t = clamped(tuning);
  return choose(h, kElems, t.backward_floats, 1, t.backward_block);
}

size_t mixed_backward_smem(const Config& c, int64_t h) {
  return c.rows_per_block > 1 ? 2 * h * sizeof(float) : 0;
}

// Calls f(kernel) with the backward kernel of `c`, `branch` and `drop`, all of one signature.
template <typename W, typename F>
void with_mixed_backward_kernel(const Config& c, bool branch, bool drop, F&& f) {
  with_packs<kMaxFloats / kElems>(c.packs, [&](auto packs) {
    constexpr int P = decltype(packs)::value;
    auto pick = [&](auto warp) {
      constexpr bool kW = decltype(warp)::value;
      if (drop) return f(mixed_backward_kernel<W, P, kW, true, true>);
      if (branch) return f(mixed_backward_kernel<W, P, kW, true, false>);
      return f(mixed_backward_kernel<W, P, kW, false, false>);
    };
    if (c.warp()) return pick(std::true_type{});
    return pick(std::false_type{});
  });
}

template <typename W>
void launch_mixed_forward(const void* x, const float* res, float* sum, const void* gamma, const void* beta, void* y,
                          float* mean, float* rstd, int64_t rows, int64_t h, float eps, cudaStream_t stream,
                          const LayerNormTuning& tuning, const ResidualDropout& dropout) {
  const Config c = forward_config(h, kElems, clamped(tuning));
  const int64_t blocks = std::min<int64_t>(ceil_div(rows, c.rows_per_block), 1 << 30);
  const bool drop = dropout.p > 0.f;
  const DropArgs args = drop ? drop_args(dropout) : DropArgs{};
  with_packs<kMaxFloats / kElems>(c.packs, [&](auto packs) {
    constexpr int P = decltype(packs)::value;
    auto launch = [&](auto kernel) {
      kernel<<<static_cast<unsigned>(blocks), c.threads(), 0, stream>>>(
          x, res, sum, static_cast<const W*>(gamma), static_cast<const W*>(beta), static_cast<W*>(y), mean, rstd, rows,
          static_cast<int>(h), c.group, eps, args);
    };
    auto pick = [&](auto warp) {
      constexpr bool kW = decltype(warp)::value;
      if (drop) return launch(mixed_forward_kernel<W, P, kW, true, true>);
      if (res != nullptr) return launch(mixed_forward_kernel<W, P, kW, true, false>);
      return launch(mixed_forward_kernel<W, P, kW, false, false>);
    };
    if (c.warp()) return pick(std::true_type{});
    return pick(std::false_type{});
  });
  check(cudaGetLastError(), "layer_norm_mixed_forward launch");
}

template <typename W>
int64_t mixed_backward_partials(int64_t rows, int64_t h, const LayerNormTuning& tuning, bool drop) {
  const Config c = mixed_backward_config(h, tuning);
  const size_t smem = mixed_backward_smem(c, h);
  // The fewest resident blocks of the kernels the backward may launch (with or without the branch's gradient).
  int per_sm = 1 << 30;
  for (const bool branch : {false, true}) {
    with_mixed_backward_kernel<W>(c, branch, drop && branch, [&](auto kernel) {
      allow_smem(kernel, smem);
      int n = 0;
      check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, c.threads(), smem),
            "layer_norm_mixed_backward occupancy");
      per_sm = std::min(per_sm, n);
    });
  }
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  const int64_t resident = static_cast<int64_t>(std::max(per_sm, 1)) * sms;
  return std::max<int64_t>(1, std::min(ceil_div(rows, int64_t{c.rows_per_block}), resident));
}

template <typename W>
void launch_mixed_backward(const void* dy, const float* x, const void* gamma, const float* mean, const float* rstd,
                           const float* dres, float* dx, const ColumnSumOut& dgamma, const ColumnSumOut& dbeta,
                           float* workspace, int64_t partials, int64_t rows, int64_t h, cudaStream_t stream,
                           const MixedBranchGrad& branch, const LayerNormTuning& tuning) {
  const Config c = mixed_backward_config(h, tuning);
  const size_t smem = mixed_backward_smem(c, h);
  const bool want_branch = branch.dx != nullptr, drop = want_branch && branch.p > 0.f;
  const float scale = drop ? keep_scale(branch.p) : 1.f;
  with_mixed_backward_kernel<W>(c, want_branch, drop, [&](auto kernel) {
    allow_smem(kernel, smem);
    kernel<<<static_cast<unsigned>(partials), c.threads(), smem, stream>>>(
        static_cast<const W*>(dy), x, static_cast<const W*>(gamma), mean, rstd, dres, dx, static_cast<W*>(branch.dx),
        branch.keep, scale, workspace, rows, static_cast<int>(h), c.group);
  });
  check(cudaGetLastError(), "layer_norm_mixed_backward launch");
  gamma_beta_kernel<W><<<static_cast<unsigned>(ceil_div(h, kReduceCols)), dim3(kReduceCols, kReduceRows), 0, stream>>>(
      workspace, partials, static_cast<int>(h), dgamma, dbeta);
  check(cudaGetLastError(), "layer_norm_mixed_backward gamma/beta launch");
}

void check_model_type(FloatType type, const char* what) {
  if (type == FloatType::kFloat32)
    throw std::invalid_argument(std::string(what) +
                                ": the model type must be bf16 or fp16 (an fp32 model takes layer_norm_kernels.h)");
}

}  // namespace

void layer_norm_mixed_forward(const void* x, const void* gamma, const void* beta, void* y, float* mean, float* rstd,
                              FloatType model_type, int64_t rows, int64_t h, float eps, cudaStream_t stream,
                              const float* residual, float* sum, const LayerNormTuning& tuning,
                              const ResidualDropout& dropout) {
  check_model_type(model_type, "layer_norm_mixed_forward");
  check_args(rows, h, {x, gamma, beta, y}, "layer_norm_mixed_forward");
  if ((residual == nullptr) != (sum == nullptr))
    throw std::invalid_argument("layer_norm_mixed_forward: residual and sum go together");
  if (residual != nullptr) check_args(rows, h, {residual, sum}, "layer_norm_mixed_forward");
  check_dropout(dropout.p, model_type, dropout.keep, residual, "layer_norm_mixed_forward");
  if (rows == 0) return;
  if (model_type == FloatType::kBFloat16)
    return launch_mixed_forward<__nv_bfloat16>(x, residual, sum, gamma, beta, y, mean, rstd, rows, h, eps, stream,
                                               tuning, dropout);
  launch_mixed_forward<__half>(x, residual, sum, gamma, beta, y, mean, rstd, rows, h, eps, stream, tuning, dropout);
}

int64_t layer_norm_mixed_backward_partials(FloatType model_type, int64_t rows, int64_t h, const LayerNormTuning& tuning,
                                           bool dropout) {
  check_model_type(model_type, "layer_norm_mixed_backward_partials");
  check_args(rows, h, {}, "layer_norm_mixed_backward_partials");
  if (model_type == FloatType::kBFloat16) return mixed_backward_partials<__nv_bfloat16>(rows, h, tuning, dropout);
  return mixed_backward_partials<__half>(rows, h, tuning, dropout);
}

void layer_norm_mixed_backward(const void* dy, const float* x, const void* gamma, const float* mean, const float* rstd,
                               float* dx, const ColumnSumOut& dgamma, const ColumnSumOut& dbeta, float* workspace,
                               int64_t partials, FloatType model_type, int64_t rows, int64_t h, cudaStream_t stream,
                               const float* dresidual, const MixedBranchGrad& branch, const LayerNormTuning& tuning) {
  check_model_type(model_type, "layer_norm_mixed_backward");
  check_args(rows, h, {dy, x, gamma, dx}, "layer_norm_mixed_backward");
  if (dresidual != nullptr) check_args(rows, h, {dresidual}, "layer_norm_mixed_backward");
  if (branch.dx != nullptr) check_args(rows, h, {branch.dx}, "layer_norm_mixed_backward");
  if (branch.p > 0.f && branch.dx == nullptr)
    throw std::invalid_argument("layer_norm_mixed_backward: the dropout's gradient needs the branch's output");
  check_dropout(branch.p, model_type, branch.keep, branch.dx, "layer_norm_mixed_backward");
  if (partials < 1 || partials > (int64_t{1} << 30))
    throw std::invalid_argument("layer_norm_mixed_backward: partials must be in [1, 2^30]");
  if (model_type == FloatType::kBFloat16)
    return launch_mixed_backward<__nv_bfloat16>(dy, x, gamma, mean, rstd, dresidual, dx, dgamma, dbeta, workspace,
                                                partials, rows, h, stream, branch, tuning);
  launch_mixed_backward<__half>(dy, x, gamma, mean, rstd, dresidual, dx, dgamma, dbeta, workspace, partials, rows, h,
                                stream, branch, tuning);
}

}  // namespace megaton::kernels
