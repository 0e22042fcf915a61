// One optimizer step: megaton's flat-buffer MixedPrecisionOptimizer (a fixed number of large kernels) against
// LibTorch's AdamW (a loop of ~10 small kernels per parameter), on one rank, for many small and few large
// parameters. Args: {number of parameters, elements per parameter}.
//   build-optim/perf/bench_optim_step --benchmark_min_time=1
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "optim/optimizer.h"
#include "parallel/data/data_parallel.h"

using namespace megaton;

namespace {

class SelfComm : public dist::Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::string& name() const override { return name_; }
  const std::vector<int>& members() const override { return members_; }
  void all_reduce(torch::Tensor&, dist::ReduceOp) override {}
  void all_gather(torch::Tensor& out, const torch::Tensor& in) override { out.copy_(in); }
  void reduce_scatter(torch::Tensor& out, const torch::Tensor& in, dist::ReduceOp) override { out.copy_(in); }
  void broadcast(torch::Tensor&, int) override {}
  void send(const torch::Tensor&, int) override {}
  void recv(torch::Tensor&, int) override {}
  void send_recv(const torch::Tensor&, int, torch::Tensor&, int) {}
  void barrier() override {}

 private:
  std::string name_ = "self";
  std::vector<int> members_{0};
};

dist::ProcessGroups self_groups() {
  dist::ProcessGroups g{dist::RankGrid(1, 1, 1)};
  g.world = g.tp = g.dp = g.pp = g.mp = g.embedding = std::make_shared<SelfComm>();
  return g;
}

parallel::ParamList make_params(int64_t n, int64_t numel, torch::ScalarType dtype) {
  parallel::ParamList ps;
  for (int64_t i = 0; i < n; ++i) {
    parallel::ParamInfo p;
    p.name = "p" + std::to_string(i);
    p.param = torch::randn({numel}).to(dtype).set_requires_grad(true);
    p.no_weight_decay = i % 3 == 0;  // biases/LayerNorms interleaved with weights
    ps.push_back(p);
  }
  return ps;
}

void flat_step(benchmark::State& state, torch::ScalarType dtype) {
  auto groups = self_groups();
  auto params = make_params(state.range(0), state.range(1), dtype);
  parallel::DataParallel dp(params, groups, {});
  optim::OptimizerOptions o;
  o.lr = 1e-4;
  optim::MixedPrecisionOptimizer opt(dp, groups, o, nullptr);
  for (auto _ : state) {
    state.PauseTiming();
    dp.grad_buffer().normal_();
    state.ResumeTiming();
    opt.step();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0) * state.range(1));
}

void BM_FlatAdamFp32(benchmark::State& s) {
  flat_step(s, torch::kFloat32);
}
void BM_FlatAdamBf16(benchmark::State& s) {
  flat_step(s, torch::kBFloat16);
}

void BM_LibtorchAdamWPerParam(benchmark::State& state) {
  auto params = make_params(state.range(0), state.range(1), torch::kFloat32);
  std::vector<torch::Tensor> ts;
  for (auto& p : params) {
    ts.push_back(p.param);
    p.param.mutable_grad() = torch::zeros_like(p.param);
  }
  torch::optim::AdamW opt(ts, torch::optim::AdamWOptions(1e-4).weight_decay(0.01));
  for (auto _ : state) {
    state.PauseTiming();
    for (auto& t : ts) t.mutable_grad().normal_();
    state.ResumeTiming();
    opt.step();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0) * state.range(1));
}

}  // namespace

BENCHMARK(BM_FlatAdamFp32)->Args({400, 2048})->Args({8, 1 << 20})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LibtorchAdamWPerParam)->Args({400, 2048})->Args({8, 1 << 20})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FlatAdamBf16)->Args({400, 2048})->Args({8, 1 << 20})->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
