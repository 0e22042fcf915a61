// One Adam step of a bf16 model's flat buffers at GPT-2 124M and GPT 1.3B sizes: the fused CUDA kernel
// (kernels/adam_kernels.cu: clip coefficient, moments, weight decay, update and the bf16 parameter write in one pass)
// and the ATen sequence it replaces in MixedPrecisionOptimizer (g *= clip, optim::adam_step_aten, parameters <-
// masters), timed alternately in the same iterations. Counters: aten_ms, fused_ms, speedup = aten / fused, and the
// memory traffic each moves (fused: 30 bytes per parameter, read g m v p, write m v p and the bf16 parameter; ATen:
// ~106) as fused_GBps / aten_GBps; the benchmark's own time and bytes/s are the fused kernel's.
// BM_AdamTuning/{n, packs}: the fused kernel with `packs` 16-byte packs per thread per pass (kernels::AdamTuning)
// against the default (1), timed alternately; counters as above with aten_* the default's.
// BM_AdamBesideForward/{model}/{carveout}: --overlap-optimizer-step's question in isolation. A forward of the model's
// GEMMs (per layer QKV, projection, fc1, fc2 on [s b, h], bf16; no attention, LayerNorm or loss) after the fused Adam
// of every parameter ("aten" slot: the update first, then the forward, as without the flag) against the same Adam
// queued on optim::UpdateStream's side stream in the forward's groups (the embedding, then each layer), each layer's
// GEMMs waiting for its group only ("fused" slot); both on a high-priority stream, as the trainer runs with the flag.
// speedup = serial / overlapped; adam_ms: the update alone; hidden = (serial - overlapped) / adam_ms, the fraction of
// the update the overlap hid (1: all of it). carveout: the SMs the overlapped forward's GEMMs
// leave to the update (ops/gemm_sm_carveout.h; 0: none, cuBLAS's GEMMs then fill every SM).
//   build/perf/bench_adam [--benchmark_min_time=1]     (reports an error row without a CUDA device)
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "bench_alternate.h"
#include "ops/gemm_sm_carveout.h"
#include "optim/adam_step.h"
#include "optim/update_stream.h"
#include "train/step_graph.h"

using namespace megaton;

namespace {

constexpr double kFusedBytes = 30;  // per parameter: read 4 x fp32, write 3 x fp32 + 1 x bf16
// ATen: clip mul 8; m: mul 8 + add 12; v: mul 8 + addcmul 16; decay 8; sqrt 8; div 8; add 8; addcdiv 16; copy 6.
constexpr double kAtenBytes = 8 + 20 + 24 + 8 + 8 + 8 + 8 + 16 + 6;

// The buffers of one Adam step over n parameters (fp32 masters, moments and gradient, bf16 parameters) and its scalars.
struct AdamBuffers {
  torch::Tensor master, m, v, grad0, grad, param, chunks;
  std::vector<optim::Run> runs;
  optim::AdamScalars s;

  explicit AdamBuffers(int64_t n) {
    auto f32 = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat32);
    master = torch::randn({n}, f32), m = torch::zeros({n}, f32), v = torch::zeros({n}, f32);  // [n]
    grad0 = torch::randn({n}, f32), grad = grad0.clone();                                     // [n]
    param = master.to(torch::kBFloat16);                                                      // [n]
    // Weight decay on ~2/3 of the elements in runs of 1M, as weights and biases/LayerNorms alternate in a model.
    for (int64_t at = 0; at + (1 << 20) <= n; at += 3 << 19) runs.push_back({at, 1 << 20});
    chunks = optim::adam_chunk_table(runs, n).to(torch::kCUDA);  // [C, 3]
    kernels::AdamHyper& h = s.hyper;
    h.lr = 1e-4, h.beta1 = 0.9, h.beta2 = 0.95, h.weight_decay = 0.1;
    h.bias_correction1 = 0.1, h.bias_correction2 = 0.05, h.grad_scale = 0.5;
  }
  void fused(int packs_per_pass = 1) { optim::adam_step_fused(master, m, v, grad, chunks, s, param, packs_per_pass); }
};

void BM_AdamFusedVsAten(benchmark::State& state) {
  if (!torch::cuda::is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const int64_t n = state.range(0);
  AdamBuffers b(n);
  perf::time_alternately(
      state, [&] { b.grad.copy_(b.grad0); },  // the ATen path uses the gradient as scratch
      [&] { b.fused(); },
      [&] {
        optim::adam_step_aten(b.master, b.m, b.v, b.grad, b.runs, b.s);  // applies grad_scale as the clip's g.mul_ does
        b.param.copy_(b.master);
      },
      kFusedBytes * static_cast<double>(n), kAtenBytes * static_cast<double>(n));
}

void BM_AdamTuning(benchmark::State& state) {
  if (!torch::cuda::is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const int64_t n = state.range(0);
  const int packs = static_cast<int>(state.range(1));
  AdamBuffers b(n);
  const double bytes = kFusedBytes * static_cast<double>(n);
  perf::time_alternately(
      state, [] {}, [&] { b.fused(packs); }, [&] { b.fused(1); }, bytes, bytes);
}

// One model's forward GEMMs and its update groups for BM_AdamBesideForward.
struct LayeredModel {
  std::vector<std::unique_ptr<AdamBuffers>> groups;  // [0] the embedding, [1 + i] layer i
  std::vector<torch::Tensor> w;                      // per layer: qkv [3h, h], proj [h, h], fc1 [4h, h], fc2 [h, 4h]
  torch::Tensor x, qkv, y, f1;                       // [T, h], [T, 3h], [T, h], [T, 4h]
  int layers = 0;

  LayeredModel(int layers_, int64_t h, int64_t seq, int64_t micro_batch) : layers(layers_) {
    const int64_t vocab = 50304, T = seq * micro_batch;
    groups.push_back(std::make_unique<AdamBuffers>((vocab + seq) * h + 2 * h));  // embeddings, final LayerNorm
    auto bf16 = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
    for (int i = 0; i < layers; ++i) {
      groups.push_back(std::make_unique<AdamBuffers>(12 * h * h + 13 * h));
      for (int64_t rows : {3 * h, h, 4 * h}) w.push_back(torch::randn({rows, h}, bf16) * 0.02);
      w.push_back(torch::randn({h, 4 * h}, bf16) * 0.02);
    }
    x = torch::randn({T, h}, bf16), qkv = torch::empty({T, 3 * h}, bf16);
    y = torch::empty({T, h}, bf16), f1 = torch::empty({T, 4 * h}, bf16);
  }
  void adam(int g) { groups[static_cast<size_t>(g)]->fused(); }
  void layer(int i) {  // y = x qkv^T ..., the four GEMMs of a layer's forward
    const auto k = static_cast<size_t>(4 * i);
    at::mm_out(qkv, x, w[k].t());
    at::mm_out(y, x, w[k + 1].t());
    at::mm_out(f1, x, w[k + 2].t());
    at::mm_out(y, f1, w[k + 3].t());
  }
};

void BM_AdamBesideForward(benchmark::State& state) {
  if (!torch::cuda::is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  // As the trainer with the flag: the forward on a high-priority stream.
  const train::StepStream forward_stream(true, 0);
  const bool big = state.range(0) == 1;  // 0: GPT-2 124M (mb 32, seq 1024), 1: GPT 1.3B (mb 8, seq 2048)
  LayeredModel m(big ? 24 : 12, big ? 2048 : 768, big ? 2048 : 1024, big ? 8 : 32);
  const int groups = m.layers + 1;
  optim::UpdateStream side(torch::Device(torch::kCUDA, 0), groups);
  auto serial = [&] {
    for (int g = 0; g < groups; ++g) m.adam(g);
    for (int i = 0; i < m.layers; ++i) m.layer(i);
  };
  const torch::Device gpu(torch::kCUDA, 0);
  const int carveout = static_cast<int>(state.range(1));  // ops/gemm_sm_carveout.h
  auto overlapped = [&] {
    side.run([&](int g) { m.adam(g); }, [] {});
    ops::set_gemm_sm_carveout(gpu, carveout);
    for (int i = 0; i < m.layers; ++i) {
      side.wait(1 + i);  // the embedding's group and this layer's (the side stream runs in order)
      m.layer(i);
    }
    side.wait(groups);
    ops::set_gemm_sm_carveout(gpu, 0);
  };
  double adam_s = 0;
  for (int rep = 0; rep < 3; ++rep) {  // the update alone, best of three
    torch::cuda::synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int g = 0; g < groups; ++g) m.adam(g);
    torch::cuda::synchronize();
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    adam_s = rep == 0 ? t : std::min(adam_s, t);
  }
  perf::time_alternately(
      state, [] {}, overlapped, serial, 0, 0);
  state.counters["adam_ms"] = adam_s * 1e3;
  const double serial_ms = state.counters["aten_ms"], overlapped_ms = state.counters["fused_ms"];
  state.counters["hidden"] = (serial_ms - overlapped_ms) / (adam_s * 1e3);
}

}  // namespace

// Parameters of GPT-2 124M (12 x 768, sequence 1024) and GPT 1.3B (24 x 2048, sequence 2048), vocabulary padded to
// 50304: 12 l h^2 + 13 l h + (V + s) h + 2 h.
BENCHMARK(BM_AdamFusedVsAten)->Arg(124475904)->Arg(1315819520)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AdamTuning)
    ->Args({1315819520, 2})
    ->Args({1315819520, 4})
    ->Args({124475904, 2})
    ->Args({124475904, 4})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_AdamBesideForward)->ArgsProduct({{0, 1}, {0, 8, 16, 32}})->UseManualTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
