// LayerNorm forward + backward at GPT-2 124M ([32768 rows = micro-batch 32 x seq 1024, h = 768]) and GPT 1.3B
// ([16384 = 8 x 2048, 2048]) training sizes, bf16: the fused CUDA kernels (kernels/layer_norm_kernels.cu) and ATen's
// native_layer_norm / native_layer_norm_backward they replace, timed alternately in the same iterations with CUDA
// events around kReps back-to-back calls (GPU time, without the host's launch gaps).
// BM_LayerNormFusedVsAten: the ops without autograd. Counters: aten_us, fused_us (forward + backward, one call),
// aten_fwd_us, fused_fwd_us (forward alone), speedup = aten / fused, fused_GBps (the 5 * rows * h elements the
// fused pair must move: x read and y written forward, x and dy read and dx written backward).
// BM_LayerNormAutogradFusedVsAten: ops::layer_norm(use_fused) and backward() through autograd, as the model runs it.
// BM_LayerNormTuning: the kernels' LayerNormTuning choices, as training calls them (with the residual add).
// BM_DropoutAddLayerNormVsAten / BM_DropoutAddLayerNormKernels: the hidden dropout drawn in the kernels
// (--dropout-layernorm-fusion) against ATen's fused dropout before the add; the kernels' parts.
// BM_MixedAddLayerNormVsAten: --fp32-residual-connection's add and LayerNorm (a bf16 branch on an fp32 residual, bf16
// weights; kernels/layer_norm_mixed_kernels.cu) through autograd against ATen's mixed path (the promoted add, an fp32
// LayerNorm of upcast weights, the cast of y), with the hidden dropout (p = 0.1, range(2) = 1) or without. Counter
// fused_GBps: the bytes the fused pair must move (forward: x 2, r 4, sum 4, y 2; backward: x 4, dy 2, dsum 4, dx 4,
// the branch's 2 bytes per element).
// The benchmarks' own times are the fused ones.
//   build/perf/bench_layer_norm [--benchmark_min_time=1]     (reports an error row without a CUDA device/build)
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <iterator>
#include <string>

#include "bench_gpu_seconds.h"
#include "ops/layer_norm.h"
#ifdef MEGATON_HAVE_CUDA
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "layer_norm_kernels.h"
#include "ops/layer_norm_cuda.h"
#endif

using namespace megaton;

namespace {

constexpr double kEps = 1e-5;
constexpr int kReps = 25;  // calls per timing (GPT-2 124M runs 25 LayerNorms per step)

#ifdef MEGATON_HAVE_CUDA
using perf::gpu_seconds;

struct Inputs {
  torch::Tensor x, w, b, dy;  // [rows, h], [h], [h], [rows, h] bf16
};

Inputs make_inputs(int64_t rows, int64_t h) {
  auto opts = torch::TensorOptions().device(torch::kCUDA);
  return {torch::randn({rows, h}, opts).to(torch::kBFloat16), (1 + 0.1 * torch::randn({h}, opts)).to(torch::kBFloat16),
          (0.1 * torch::randn({h}, opts)).to(torch::kBFloat16), torch::randn({rows, h}, opts).to(torch::kBFloat16)};
}

// Times step(false) (ATen's side) and step(true) (ours) alternately, kReps back-to-back calls of each per iteration,
// after a warm-up: counters aten_us, fused_us (per call) and speedup; the iteration's time is ours.
template <typename Step>
void alternate_aten_fused(benchmark::State& state, Step&& step) {
  gpu_seconds(step(false), 2), gpu_seconds(step(true), 2);  // warm-up
  double a = 0, f = 0;
  int64_t n = 0;
  for (auto _ : state) {
    a += gpu_seconds(step(false), kReps);
    const double t = gpu_seconds(step(true), kReps);
    f += t;
    ++n;
    state.SetIterationTime(t);
  }
  state.counters["aten_us"] = a / double(n) * 1e6;
  state.counters["fused_us"] = f / double(n) * 1e6;
  state.counters["speedup"] = a / f;
}
#endif

using perf::skip_without_cuda;

void BM_LayerNormFusedVsAten(benchmark::State& state) {
  if (skip_without_cuda(state)) return;
#ifdef MEGATON_HAVE_CUDA
  const int64_t rows = state.range(0), h = state.range(1);
  const Inputs in = make_inputs(rows, h);
  auto aten_fwd = [&] { return at::native_layer_norm(in.x, {h}, in.w, in.b, kEps); };
  auto aten = [&] {
    auto [y, mean, rstd] = aten_fwd();
    at::native_layer_norm_backward(in.dy, in.x, {h}, mean, rstd, in.w, in.b, {true, true, true});
  };
  auto fused_fwd = [&] { return ops::fused_layer_norm_forward(in.x, in.w, in.b, kEps); };
  auto fused = [&] {
    const ops::FusedLayerNormOutput f = fused_fwd();
    ops::fused_layer_norm_backward(in.dy, in.x, in.w, f.mean, f.rstd);
  };
  gpu_seconds(aten, 2), gpu_seconds(fused, 2);  // warm-up (allocator, kernels)
  double a = 0, f = 0, af = 0, ff = 0;
  int64_t n = 0;
  for (auto _ : state) {
    a += gpu_seconds(aten, kReps);
    const double t = gpu_seconds(fused, kReps);
    f += t;
    af += gpu_seconds(aten_fwd, kReps);
    ff += gpu_seconds(fused_fwd, kReps);
    ++n;
    state.SetIterationTime(t);
  }
  const double bytes = 5.0 * static_cast<double>(rows * h) * 2;  // bf16
  state.SetBytesProcessed(static_cast<int64_t>(bytes) * n);
  state.counters["aten_us"] = a / double(n) * 1e6;
  state.counters["fused_us"] = f / double(n) * 1e6;
  state.counters["aten_fwd_us"] = af / double(n) * 1e6;
  state.counters["fused_fwd_us"] = ff / double(n) * 1e6;
  state.counters["speedup"] = a / f;
  state.counters["fused_GBps"] = bytes * double(n) / f / 1e9;
#endif
}

void BM_LayerNormAutogradFusedVsAten(benchmark::State& state) {
  if (skip_without_cuda(state)) return;
#ifdef MEGATON_HAVE_CUDA
  const int64_t rows = state.range(0), h = state.range(1);
  const Inputs in = make_inputs(rows, h);
  torch::Tensor x = in.x.clone().requires_grad_(true), w = in.w.clone().requires_grad_(true),
                b = in.b.clone().requires_grad_(true);
  auto step = [&](bool fused) {
    return [&, fused] {
      x.mutable_grad() = torch::Tensor(), w.mutable_grad() = torch::Tensor(), b.mutable_grad() = torch::Tensor();
      ops::layer_norm(x, w, b, kEps, fused).backward(in.dy);
    };
  };
  alternate_aten_fused(state, step);
#endif
}

#ifdef MEGATON_HAVE_CUDA
// The LayerNormTuning choices BM_LayerNormTuning compares; index 0 is the default.
const kernels::LayerNormTuning kTunings[] = {
    // forward floats, backward floats, backward rows per pass, forward block, backward block (early residual load:
    // the default, true, where it applies)
    {},                            // the default: forward 32 per thread up to h = 1024, else 16; backward 8
    {32, 16, 1, 512, 512},         // the first named-barrier version's
    {32, 16, 1, 256, 256},         //
    {16, 8, 1, 512, 512},          //
    {16, 16, 1, 256, 256},         //
    {16, 8, 2, 256, 256},          // the backward takes two rows per pass
    {8, 8, 1, 256, 256},           //
    {24, 24, 1, 512, 512},         // 3 vectors per thread (h = 768 bf16: a warp per row)
    {0, 8, 1, 128, 128},           // smaller blocks
    {0, 8, 1, 256, 512, false},    // the residual gradient loaded after the reduction
    {0, 8, 1, 256, 512, true, 0},  // the backward's loads straight into registers
    {0, 8, 1, 256, 512, true, 2},  // the backward's loads one row ahead through a shared-memory ring (cp.async)
    {0, 8, 1, 256, 256, true, 4},  // three rows ahead (the default), blocks of 256
};
#endif

// The kernels as training runs them (bf16, forward with the residual add, backward with the residual gradient added)
// for each kTunings entry (range 2): forward and backward GPU time per call and the bytes they move per second
// (4 rows x h tensors each way: x and residual read, sum and y written; dy, x and the residual gradient read, dx
// written).
void BM_LayerNormTuning(benchmark::State& state) {
  if (skip_without_cuda(state)) return;
#ifdef MEGATON_HAVE_CUDA
  const int64_t rows = state.range(0), h = state.range(1);
  const kernels::LayerNormTuning tuning = kTunings[state.range(2)];
  const Inputs in = make_inputs(rows, h);
  const torch::Tensor res = torch::randn_like(in.x), dres = torch::randn_like(in.dy);
  torch::Tensor y = torch::empty_like(in.x), sum = torch::empty_like(in.x), dx = torch::empty_like(in.x);
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA);
  torch::Tensor mean = torch::empty({rows}, f32), rstd = torch::empty({rows}, f32);
  torch::Tensor dw = torch::empty_like(in.w), db = torch::empty_like(in.b);
  const auto type = kernels::FloatType::kBFloat16;
  const int64_t partials = kernels::layer_norm_backward_partials(type, rows, h, tuning);
  torch::Tensor workspace = torch::empty({2, partials, h}, f32);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  auto fwd = [&] {
    kernels::layer_norm_forward(in.x.data_ptr(), in.w.data_ptr(), in.b.data_ptr(), y.data_ptr(), mean.data_ptr<float>(),
                                rstd.data_ptr<float>(), type, rows, h, kEps, stream, res.data_ptr(), sum.data_ptr(),
                                tuning);
  };
  auto bwd = [&] {
    kernels::layer_norm_backward(in.dy.data_ptr(), sum.data_ptr(), in.w.data_ptr(), mean.data_ptr<float>(),
                                 rstd.data_ptr<float>(), dx.data_ptr(), dw.data_ptr(), db.data_ptr(),
                                 workspace.data_ptr<float>(), partials, type, rows, h, stream, dres.data_ptr(), tuning);
  };
  gpu_seconds(fwd, 2), gpu_seconds(bwd, 2);  // warm-up
  double f = 0, b = 0;
  int64_t n = 0;
  for (auto _ : state) {
    const double tf = gpu_seconds(fwd, kReps), tb = gpu_seconds(bwd, kReps);
    f += tf, b += tb, ++n;
    state.SetIterationTime(tf + tb);
  }
  const double bytes = 4.0 * static_cast<double>(rows * h) * 2;  // each way, bf16
  state.counters["fwd_us"] = f / double(n) * 1e6;
  state.counters["bwd_us"] = b / double(n) * 1e6;
  state.counters["fwd_GBps"] = bytes * double(n) / f / 1e9;
  state.counters["bwd_GBps"] = bytes * double(n) / b / 1e9;
  state.counters["partials"] = static_cast<double>(partials);
  state.SetLabel("floats " + std::to_string(tuning.forward_floats) + "/" + std::to_string(tuning.backward_floats) +
                 " rows " + std::to_string(tuning.backward_rows) + " blocks " + std::to_string(tuning.forward_block) +
                 "/" + std::to_string(tuning.backward_block) + (tuning.backward_early_residual ? " early" : "") +
                 " stages " + std::to_string(tuning.backward_stages));
#endif
}

// Megatron's hidden dropout before the residual add, through autograd as the transformer layer runs it (forward of
// ops::add_layer_norm, backward of both outputs), bf16, p = 0.1: drawn in the LayerNorm kernels
// (--dropout-layernorm-fusion: fused_us) against ATen's fused dropout and its masked-scale backward around the same
// fused add + LayerNorm (aten_us), alternately in the same iterations.
void BM_DropoutAddLayerNormVsAten(benchmark::State& state) {
  if (skip_without_cuda(state)) return;
#ifdef MEGATON_HAVE_CUDA
  const int64_t rows = state.range(0), h = state.range(1);
  const Inputs in = make_inputs(rows, h);
  const torch::Tensor r0 = torch::randn_like(in.x), dsum = torch::randn_like(in.dy);
  at::Generator gen = at::globalContext().defaultGenerator(torch::Device(torch::kCUDA, 0));
  torch::Tensor x = in.x.clone().requires_grad_(true), r = r0.clone().requires_grad_(true);
  torch::Tensor w = in.w.clone().requires_grad_(true), b = in.b.clone().requires_grad_(true);
  auto step = [&](bool in_kernel) {
    return [&, in_kernel] {
      for (torch::Tensor* t : {&x, &r, &w, &b}) t->mutable_grad() = torch::Tensor();
      const ops::AddLayerNorm out = ops::add_layer_norm(x, r, w, b, kEps, true, {}, {0.1, &gen, in_kernel});
      torch::autograd::backward({out.sum, out.y}, {dsum, in.dy});
    };
  };
  alternate_aten_fused(state, step);
#endif
}

void BM_MixedAddLayerNormVsAten(benchmark::State& state) {
  if (skip_without_cuda(state)) return;
#ifdef MEGATON_HAVE_CUDA
  const int64_t rows = state.range(0), h = state.range(1);
  const double p = state.range(2) != 0 ? 0.1 : 0.0;
  const Inputs in = make_inputs(rows, h);
  const torch::Tensor r0 = torch::randn(in.x.sizes(), in.x.options().dtype(torch::kFloat32));  // [rows, h] fp32
  const torch::Tensor dsum = torch::randn_like(r0);
  at::Generator gen = at::globalContext().defaultGenerator(torch::Device(torch::kCUDA, 0));
  torch::Tensor x = in.x.clone().requires_grad_(true), r = r0.clone().requires_grad_(true);
  torch::Tensor w = in.w.clone().requires_grad_(true), b = in.b.clone().requires_grad_(true);
  auto step = [&](bool fused) {
    return [&, fused] {
      for (torch::Tensor* t : {&x, &r, &w, &b}) t->mutable_grad() = torch::Tensor();
      const ops::AddLayerNorm out = ops::add_layer_norm(x, r, w, b, kEps, fused, {}, {p, &gen, true});
      torch::autograd::backward({out.sum, out.y}, {dsum, in.dy});
    };
  };
  alternate_aten_fused(state, step);
  const double bytes = static_cast<double>(rows * h) * (12 + 16);
  state.counters["fused_GBps"] = bytes / (state.counters["fused_us"] * 1e-6) / 1e9;
#endif
}

// The dropout's kernels directly (bf16, p = 0.1): the forward with the draws (fwd_us; the plain forward with the
// residual add: plain_fwd_us), the backward writing the dropped branch's gradient in its kernel (bwd_fused_us) or in a
// pass of its own (bwd_separate_us; LayerNormTuning::backward_dropout_fused), the plain backward (plain_bwd_us).
void BM_DropoutAddLayerNormKernels(benchmark::State& state) {
  if (skip_without_cuda(state)) return;
#ifdef MEGATON_HAVE_CUDA
  const int64_t rows = state.range(0), h = state.range(1);
  const Inputs in = make_inputs(rows, h);
  const torch::Tensor res = torch::randn_like(in.x), dres = torch::randn_like(in.dy);
  torch::Tensor y = torch::empty_like(in.x), sum = torch::empty_like(in.x), dx = torch::empty_like(in.x),
                dxd = torch::empty_like(in.x);
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA);
  torch::Tensor mean = torch::empty({rows}, f32), rstd = torch::empty({rows}, f32);
  torch::Tensor keep = torch::empty({rows * h / 8}, torch::TensorOptions().dtype(torch::kUInt8).device(torch::kCUDA));
  torch::Tensor dw = torch::empty_like(in.w), db = torch::empty_like(in.b);
  const auto type = kernels::FloatType::kBFloat16;
  kernels::LayerNormTuning fused_bwd, separate_bwd;
  separate_bwd.backward_dropout_fused = false;
  const int64_t partials = kernels::layer_norm_backward_partials(type, rows, h, fused_bwd, true);
  torch::Tensor workspace = torch::empty({2, partials, h}, f32);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  kernels::ResidualDropout drop;
  drop.p = 0.1f, drop.philox.seed = 1234, drop.keep = keep.data_ptr<uint8_t>();
  const kernels::ResidualDropoutGrad drop_grad{0.1f, keep.data_ptr<uint8_t>(), dxd.data_ptr()};
  auto fwd = [&](bool with_drop) {
    return [&, with_drop] {
      kernels::layer_norm_forward(in.x.data_ptr(), in.w.data_ptr(), in.b.data_ptr(), y.data_ptr(),
                                  mean.data_ptr<float>(), rstd.data_ptr<float>(), type, rows, h, kEps, stream,
                                  res.data_ptr(), sum.data_ptr(), {}, with_drop ? drop : kernels::ResidualDropout{});
    };
  };
  auto bwd = [&](const kernels::LayerNormTuning& tuning, bool with_drop) {
    return [&, tuning, with_drop] {
      kernels::layer_norm_backward(in.dy.data_ptr(), sum.data_ptr(), in.w.data_ptr(), mean.data_ptr<float>(),
                                   rstd.data_ptr<float>(), dx.data_ptr(), dw.data_ptr(), db.data_ptr(),
                                   workspace.data_ptr<float>(), partials, type, rows, h, stream, dres.data_ptr(),
                                   tuning, with_drop ? drop_grad : kernels::ResidualDropoutGrad{});
    };
  };
  gpu_seconds(fwd(true), 2), gpu_seconds(bwd(fused_bwd, true), 2), gpu_seconds(bwd(separate_bwd, true), 2);
  double t[5] = {0, 0, 0, 0, 0};
  int64_t n = 0;
  for (auto _ : state) {
    t[0] += gpu_seconds(fwd(true), kReps);
    t[1] += gpu_seconds(fwd(false), kReps);
    t[2] += gpu_seconds(bwd(fused_bwd, true), kReps);
    t[3] += gpu_seconds(bwd(separate_bwd, true), kReps);
    t[4] += gpu_seconds(bwd(fused_bwd, false), kReps);
    ++n;
    state.SetIterationTime(t[0] / double(n) + t[2] / double(n));
  }
  const char* names[] = {"fwd_us", "plain_fwd_us", "bwd_fused_us", "bwd_separate_us", "plain_bwd_us"};
  for (int i = 0; i < 5; ++i) state.counters[names[i]] = t[i] / double(n) * 1e6;
#endif
}

void tuning_args(benchmark::internal::Benchmark* b) {
#ifdef MEGATON_HAVE_CUDA
  for (int64_t v = 0; v < static_cast<int64_t>(std::size(kTunings)); ++v) {
    b->Args({32768, 768, v});
    b->Args({16384, 2048, v});
  }
#else
  b->Args({32768, 768, 0});
#endif
}

}  // namespace

BENCHMARK(BM_LayerNormTuning)->Apply(tuning_args)->UseManualTime()->Iterations(100)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LayerNormFusedVsAten)
    ->Args({32768, 768})
    ->Args({16384, 2048})
    ->UseManualTime()
    ->Iterations(200)  // each iteration times 25 calls of each side: a fixed count keeps the run to seconds
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LayerNormAutogradFusedVsAten)
    ->Args({32768, 768})
    ->Args({16384, 2048})
    ->UseManualTime()
    ->Iterations(200)  // each iteration times 25 calls of each side: a fixed count keeps the run to seconds
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DropoutAddLayerNormVsAten)
    ->Args({32768, 768})
    ->Args({16384, 2048})
    ->UseManualTime()
    ->Iterations(100)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MixedAddLayerNormVsAten)
    ->Args({32768, 768, 0})
    ->Args({16384, 2048, 0})
    ->Args({16384, 2048, 1})
    ->UseManualTime()
    ->Iterations(100)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DropoutAddLayerNormKernels)
    ->Args({32768, 768})
    ->Args({16384, 2048})
    ->UseManualTime()
    ->Iterations(100)
    ->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
