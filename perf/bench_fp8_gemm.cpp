// The FP8 GEMMs of one GPT 1.3B layer (16384 tokens = micro-batch 8 x seq 2048, hidden 2048: QKV 2048 -> 6144,
// projection 2048 -> 2048, fc1 2048 -> 8192, fc2 8192 -> 2048) against the bf16 GEMMs they replace, timed in the
// same run on the GPU's own clock:
//   fprop  y [T, out] = x [T, in] . w^T          bf16: torch::mm;  FP8: E4M3 x E4M3, fast accumulation, bf16 out
//   dgrad  dx [T, in] = dy [T, out] . w          bf16: torch::mm;  FP8: E5M2 dy x E4M3 w^T copy, bf16 out
//   wgrad  main [out, in] += dy^T . x (fp32)     bf16: one cuBLAS GEMM into the fp32 main grad (the training path);
//                                                FP8: E5M2 dy^T copy x E4M3 x^T copy, accumulated into fp32
// Counters per row: bf16_ms, fp8_ms (the GEMM alone, operands already cast), fp8_cast_ms (the GEMM plus the casts it
// needs: for fprop x and w with w's transpose, for dgrad dy with its transpose, none more for wgrad) and speedup
// (bf16 / FP8 with its casts). Argument: {tokens, in, out, kind: 0 fprop, 1 dgrad, 2 wgrad}.
// BM_CastDbias: a backward's output-gradient cast (E5M2 with its transpose) and bias gradient (into an fp32 main grad)
// as one fused kernel (fused_ms) against the separate kernels it replaces (separate_ms: the column sums, or the GELU
// derivative with them, then the cast), and the fused kernel's bytes moved per second. Argument: {tokens, features,
// gelu}: the projection's and fc2's [16384, 2048] gradient, fc1's [16384, 8192] through the GELU.
//   build-gpu/perf/bench_fp8_gemm
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "bench_gpu_seconds.h"
#include "ops/fp8/fp8_format.h"
#ifdef MEGATON_HAVE_CUDA
#include "ops/cublaslt_gemm.h"
#include "ops/fp8/fp8_cast.h"
#include "ops/gelu_bias_grad.h"
#include "ops/linear.h"
#endif

using namespace megaton;
namespace fp8 = megaton::ops::fp8;

namespace {

void BM_Fp8VsBf16Gemm(benchmark::State& state) {
  if (perf::skip_without_cuda(state)) return;
#ifdef MEGATON_HAVE_CUDA
  const int64_t T = state.range(0), in = state.range(1), out = state.range(2), kind = state.range(3);
  const auto bf16 = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  const auto fp32 = bf16.dtype(torch::kFloat32);
  const torch::Tensor x = torch::randn({T, in}, bf16), w = torch::randn({out, in}, bf16) * 0.02;
  const torch::Tensor dy = torch::randn({T, out}, bf16) * 1e-3;
  torch::Tensor main = torch::zeros({out, in}, fp32);
  const torch::Tensor sx = torch::full({1}, 64.0f, fp32), sw = torch::full({1}, 4096.0f, fp32);
  const torch::Tensor sg = torch::full({1}, 1e6f, fp32);
  torch::Tensor amax = torch::zeros({1}, fp32);
  using fp8::Format;
  const fp8::Fp8Matrix qx = fp8::cast_to_fp8(x, sx, Format::kE4M3, true, amax);
  const fp8::Fp8Matrix qw = fp8::cast_to_fp8(w, sw, Format::kE4M3, true, amax);
  const fp8::Fp8Matrix qg = fp8::cast_to_fp8(dy, sg, Format::kE5M2, true, amax);
  torch::Tensor y = torch::empty({T, out}, bf16), dx = torch::empty({T, in}, bf16);
  ops::GemmAlgoMemo memo;
  bool ok = true;
  std::function<void()> bf16_gemm, fp8_gemm, fp8_with_casts;
  if (kind == 0) {
    bf16_gemm = [&] { torch::mm_out(y, x, w.t()); };
    fp8_gemm = [&] {
      ok &= ops::lt::fp8_gemm({qx.bytes, qx.scale_inv, Format::kE4M3}, {qw.bytes, qw.scale_inv, Format::kE4M3}, y,
                              false, true, &memo);
    };
    fp8_with_casts = [&] {
      const auto a = fp8::cast_to_fp8(x, sx, Format::kE4M3, false, amax);
      const auto b = fp8::cast_to_fp8(w, sw, Format::kE4M3, true, amax);  // its transpose serves dgrad
      ok &= ops::lt::fp8_gemm({a.bytes, a.scale_inv, Format::kE4M3}, {b.bytes, b.scale_inv, Format::kE4M3}, y, false,
                              true, &memo);
    };
  } else if (kind == 1) {
    bf16_gemm = [&] { torch::mm_out(dx, dy, w); };
    fp8_gemm = [&] {
      ok &= ops::lt::fp8_gemm({qg.bytes, qg.scale_inv, Format::kE5M2}, {qw.bytes_t, qw.scale_inv, Format::kE4M3}, dx,
                              false, false, &memo);
    };
    fp8_with_casts = [&] {
      const auto g = fp8::cast_to_fp8(dy, sg, Format::kE5M2, true, amax);  // its transpose serves wgrad
      ok &= ops::lt::fp8_gemm({g.bytes, g.scale_inv, Format::kE5M2}, {qw.bytes_t, qw.scale_inv, Format::kE4M3}, dx,
                              false, false, &memo);
    };
  } else {
    bf16_gemm = [&] { ops::accumulate_weight_grad_cuda(main, dy, x); };
    fp8_gemm = [&] {
      ok &= ops::lt::fp8_gemm({qg.bytes_t, qg.scale_inv, Format::kE5M2}, {qx.bytes_t, qx.scale_inv, Format::kE4M3},
                              main, true, false, &memo);
    };
    fp8_with_casts = fp8_gemm;  // both transposes were written by the fprop and dgrad casts
  }
  fp8_gemm();
  if (!ok) {
    state.SkipWithError("cuBLASLt offers no FP8 algorithm for these shapes");
    return;
  }
  double b = 0, f = 0, fc = 0;
  const int reps = 20;
  for (auto _ : state) {
    b = perf::gpu_seconds(bf16_gemm, reps);
    f = perf::gpu_seconds(fp8_gemm, reps);
    fc = perf::gpu_seconds(fp8_with_casts, reps);
    state.SetIterationTime(fc);
  }
  state.counters["bf16_ms"] = b * 1e3;
  state.counters["fp8_ms"] = f * 1e3;
  state.counters["fp8_cast_ms"] = fc * 1e3;
  state.counters["speedup"] = b / fc;
  state.counters["gemm_tflops_fp8"] = 2.0 * double(T) * double(in) * double(out) / f / 1e12;
#endif
}

void BM_CastDbias(benchmark::State& state) {
  if (perf::skip_without_cuda(state)) return;
#ifdef MEGATON_HAVE_CUDA
  const int64_t T = state.range(0), n = state.range(1);
  const bool gelu = state.range(2) != 0;
  const auto bf16 = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  const auto fp32 = bf16.dtype(torch::kFloat32);
  const torch::Tensor dy = torch::randn({T, n}, bf16) * 1e-3;
  const torch::Tensor pre = gelu ? torch::randn({T, n}, bf16) : torch::Tensor();
  const torch::Tensor sg = torch::full({1}, 1e6f, fp32);
  torch::Tensor amax = torch::zeros({1}, fp32), main = torch::zeros({n}, fp32), db;
  const ops::MainGrad m(main);  // no overwrite flag: added to
  const auto separate = [&] {
    const torch::Tensor g = gelu ? ops::gelu_backward_bias_grad(dy, pre, m).first : dy;
    if (!gelu) ops::bias_grad(dy, m);
    fp8::cast_to_fp8(g, sg, fp8::Format::kE5M2, true, amax);
  };
  const auto fused = [&] { fp8::cast_to_fp8_dbias(dy, pre, sg, fp8::Format::kE5M2, amax, true, m, db); };
  double sep = 0, fus = 0;
  for (auto _ : state) {
    sep = perf::gpu_seconds(separate, 20);
    fus = perf::gpu_seconds(fused, 20);
    state.SetIterationTime(fus);
  }
  state.counters["separate_ms"] = sep * 1e3;
  state.counters["fused_ms"] = fus * 1e3;
  state.counters["speedup"] = sep / fus;
  // read dy (and pre) in 16 bits, write the bytes and their transpose
  state.counters["fused_TBps"] = double(T * n) * ((gelu ? 4 : 2) + 2) / fus / 1e12;
#endif
}

}  // namespace

BENCHMARK(BM_CastDbias)  // {tokens, features, gelu}
    ->Args({16384, 2048, 0})
    ->Args({16384, 8192, 1})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_Fp8VsBf16Gemm)  // {tokens, in, out, kind}
    ->ArgsProduct({{16384}, {2048}, {6144}, {0, 1, 2}})
    ->ArgsProduct({{16384}, {2048}, {2048}, {0, 1, 2}})
    ->ArgsProduct({{16384}, {2048}, {8192}, {0, 1, 2}})
    ->ArgsProduct({{16384}, {8192}, {2048}, {0, 1, 2}})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
