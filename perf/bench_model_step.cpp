// Forward + backward of one micro-batch of a small GPT on one rank (TP = PP = 1), per position type and with or
// without activation recomputation; reports tokens/s. On the CPU this times the explicit attention path; on the GPU
// machine (LibTorch >= 2.0) the fused one. Args: {position type 0=absolute 1=rotary 2=alibi, recompute 0/1}.
//   build-model/perf/bench_model_step --benchmark_min_time=2
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "core/log.h"
#include "dist/self_communicator.h"
#include "model/gpt_stage.h"
#include "train/training_model.h"

using namespace megaton;

namespace {

model::GptConfig bench_config(int positions, bool recompute) {
  model::GptOptions m;
  m.num_layers = 4;
  m.hidden_size = 256;
  m.num_attention_heads = 8;
  m.seq_length = 256;
  m.max_position_embeddings = 256;
  m.position_embedding_type = positions == 0 ? "absolute" : positions == 1 ? "rotary" : "alibi";
  m.hidden_dropout = 0.1;
  m.attention_dropout = 0.1;
  m.checkpoint_activations = recompute;
  m.validate();
  model::GptConfig c;
  c.model = m;
  c.vocab_size = 8000;
  c.padded_vocab_size = m.padded_vocab_size(8000, 1);
  return c;
}

void BM_GptForwardBackward(benchmark::State& state) {
  const int64_t b = 4, s = 256;
  const dist::ProcessGroups groups = dist::single_rank_groups();
  train::TrainingModel model(bench_config(static_cast<int>(state.range(0)), state.range(1) != 0), groups, 0,
                             Logger(0, 1, LogLevel::kWarning));
  std::vector<model::MicroBatch> mb{{(torch::arange(b * s, torch::kInt64).view({b, s}) * 7919) % 8000,
                                     (torch::arange(b * s, torch::kInt64).view({b, s}) * 104729) % 8000,
                                     torch::ones({b, s}),
                                     {}}};
  for (auto _ : state) {
    model.chunk(0).zero_grad();
    model.run_schedule(
        1, static_cast<int>(b), static_cast<int>(s),
        [&](int chunk, int i, const torch::Tensor& in) { return model.forward_step(chunk, mb[i], in); }, {}, false);
  }
  state.counters["tokens/s"] = benchmark::Counter(double(b * s), benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

BENCHMARK(BM_GptForwardBackward)->ArgsProduct({{0, 1, 2}, {0, 1}})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
