// One optimizer step with bitsandbytes' 8-bit Adam states (--use-bnb-optimizer: optim::BlockwiseAdam8bit, ATen ops)
// against the fp32-moment Adam of the same MixedPrecisionOptimizer (the fused kernel on CUDA, the ATen ops on the
// CPU), timed alternately in the same iterations, over a bf16 model's flat buffers of GPT-2 124M-like parameters
// (many 768x768-sized weights, small biases). Counters: fp32_ms, bnb_ms, ratio = bnb / fp32, and the moment bytes of
// each (fp32_state_MB, bnb_state_MB). On CUDA when a device is present, else on the CPU.
//   build/perf/bench_adam8bit [--benchmark_min_time=1]
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <chrono>
#include <memory>

#include "dist/self_communicator.h"
#include "optim/optimizer.h"
#include "parallel/data/data_parallel.h"

using namespace megaton;

namespace {

struct Model {
  parallel::ParamList params;
  Model(int64_t weights, torch::Device device) {
    for (int64_t i = 0; i < weights; ++i) {
      add("w" + std::to_string(i), 768 * 768, false, device);
      add("b" + std::to_string(i), 768, true, device);
    }
  }
  void add(const std::string& name, int64_t n, bool no_wd, torch::Device device) {
    parallel::ParamInfo p;
    p.name = name;
    p.param = torch::randn({n}, torch::TensorOptions().device(device).dtype(torch::kBFloat16)).set_requires_grad(true);
    p.global_shape = {n};
    p.no_weight_decay = no_wd;
    params.push_back(p);
  }
};

void sync(torch::Device d) {
  if (d.is_cuda()) torch::cuda::synchronize();
}

void BM_Adam8bitVsFp32(benchmark::State& state) {
  const torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;
  auto ga = dist::single_rank_groups(), gb = dist::single_rank_groups();
  Model a(state.range(0), device), b(state.range(0), device);
  parallel::DataParallel dpa(a.params, ga, {}), dpb(b.params, gb, {});
  optim::OptimizerOptions o;
  o.lr = 1e-4;
  optim::MixedPrecisionOptimizer fp32(dpa, ga, o, nullptr);
  o.use_bnb = true;
  optim::MixedPrecisionOptimizer bnb(dpb, gb, o, nullptr);
  auto timed = [&](parallel::DataParallel& dp, optim::MixedPrecisionOptimizer& opt) {
    dp.grad_buffer().normal_();
    sync(device);
    const auto t0 = std::chrono::steady_clock::now();
    opt.step();
    sync(device);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  timed(dpa, fp32), timed(dpb, bnb);  // warm-up
  double fp32_s = 0, bnb_s = 0;
  int64_t iters = 0;
  for (auto _ : state) {
    fp32_s += timed(dpa, fp32);
    const double t = timed(dpb, bnb);
    bnb_s += t;
    state.SetIterationTime(t);
    ++iters;
  }
  state.counters["fp32_ms"] = 1e3 * fp32_s / iters;
  state.counters["bnb_ms"] = 1e3 * bnb_s / iters;
  state.counters["ratio"] = bnb_s / fp32_s;
  state.counters["fp32_state_MB"] = fp32.moment_bytes() / 1e6;
  state.counters["bnb_state_MB"] = bnb.moment_bytes() / 1e6;
  state.SetLabel(device.is_cuda() ? "cuda" : "cpu");
}

}  // namespace

// 12 and 144 weights of 768x768: 7M and 85M parameters (GPT-2 124M's layers hold 85M).
BENCHMARK(BM_Adam8bitVsFp32)->Arg(12)->Arg(144)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
