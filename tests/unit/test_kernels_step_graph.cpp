// --cuda-graph (train/step_graph.h): which runs may use it, and on a GPU its pieces together. A forward and backward
// through ops::linear into fp32 main grads (their first writes) and through DataParallel's hooks, captured once and
// replayed on new inputs copied into the captured ones, must give bit for bit the eager run's losses and gradients at
// every iteration, with the weights updated in place between iterations (the replay reads the new values); the state
// restored after each replay keeps finish_grad_sync from zeroing what the replay wrote. A capture on the default stream
// is refused.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"
#include "ops/linear.h"
#include "parallel/data_parallel.h"
#include "parallel/main_grads.h"
#include "test_optim_support.h"
#include "train/step_graph.h"
#include "train/train_config.h"

using namespace megaton;

TEST(StepGraph, UnsupportedRunsAreNamed) {
  train::TrainConfig c;
  c.model.hidden_dropout = c.model.attention_dropout = 0.0;
  EXPECT_EQ(train::cuda_graph_unsupported(c, true, 1), "");
  EXPECT_NE(train::cuda_graph_unsupported(c, false, 1).find("CPU"), std::string::npos);
  EXPECT_NE(train::cuda_graph_unsupported(c, true, 2).find("2 ranks"), std::string::npos);
  c.model.attention_dropout = 0.1;
  EXPECT_NE(train::cuda_graph_unsupported(c, true, 1).find("--attention-dropout 0.1"), std::string::npos);
  c.model.attention_dropout = 0.0;
  c.model.checkpoint_activations = true;
  EXPECT_NE(train::cuda_graph_unsupported(c, true, 1).find("--checkpoint-activations"), std::string::npos);
  c.model.checkpoint_activations = false;
  c.model.gemm_autotune = true;
  c.data.reset_attention_mask = true;
  const std::string why = train::cuda_graph_unsupported(c, false, 4);
  for (const char* part : {"CPU", "4 ranks", "--gemm-autotune", "--reset-attention-mask"})
    EXPECT_NE(why.find(part), std::string::npos) << why;
  c.model.gemm_autotune = false;
  c.data.reset_position_ids = true;  // the positions are copied into the captured inputs like the tokens
  c.data.reset_attention_mask = false;
  EXPECT_EQ(train::cuda_graph_unsupported(c, true, 1), "");
}

namespace {

struct Graphable {
  optimtest::TinyModel model{torch::kBFloat16};
  std::unique_ptr<parallel::DataParallel> dp;
  parallel::MainGrads table;

  explicit Graphable(const dist::ProcessGroups& groups) {
    for (auto& p : model.params) p.param = p.param.detach().to(torch::kCUDA).set_requires_grad(true);
    parallel::DataParallelOptions o;
    o.bucket_size_mb = 40.0 * 4 / (1024.0 * 1024.0);  // several buckets
    dp = std::make_unique<parallel::DataParallel>(model.params, groups, o);
    table.bind(dp->param_buffer(), dp->grad_buffer());
    dp->attach(table);
  }
  // TinyModel's loss with fc1 and fc2 through ops::linear (weight gradients into the main grads), the LayerNorm
  // weight and the biases' gradients through autograd and the hooks.
  torch::Tensor loss(const torch::Tensor& x, const torch::Tensor& y) {
    const auto& m = model;
    torch::Tensor h = torch::tanh(ops::linear(x * m[0], m[1], m[2], table.of(m[1])));
    return (ops::linear(h, m[3], m[4], table.of(m[3])).to(torch::kFloat32) - y).pow(2).mean().reshape({1});
  }
  void update() {  // a stand-in for the optimizer: every weight moves in place
    torch::NoGradGuard g;
    for (size_t i = 0; i < model.params.size(); ++i)
      model.params[i].param.sub_((0.05 * dp->main_grad(i)).to(torch::kBFloat16));
  }
};

}  // namespace

TEST(KernelsStepGraph, ReplaysMatchEagerStepsBitForBit) {
#ifndef MEGATON_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  train::StepStream on_side;  // as the trainer: everything (the models' and hooks' set-up too) on the side stream
  auto groups = optimtest::self_groups();
  Graphable eager(groups), graphed(groups);
  train::StepGraph graph;
  const train::StepGraphKey key{1, 1.0};
  torch::Tensor in_x, in_y, graph_loss;
  parallel::DataParallel::StepState state;
  for (int it = 0; it < 5; ++it) {
    torch::manual_seed(100 + it);
    const torch::Tensor x = torch::randn({64, 4}).to(torch::kCUDA, torch::kBFloat16);
    const torch::Tensor y = torch::randn({64, 3}).to(torch::kCUDA);
    eager.dp->zero_grad();
    torch::Tensor want = eager.loss(x, y);
    want.backward();
    eager.dp->finish_grad_sync();

    graphed.dp->zero_grad();
    torch::Tensor got;
    if (it == 0) {  // eager first, as the trainer does
      got = graphed.loss(x, y);
      got.backward();
    } else {
      if (!graph.holds(key)) {
        in_x = x.clone();
        in_y = y.clone();
        graph.capture(key, [&] {
          graph_loss = graphed.loss(in_x, in_y);
          graph_loss.backward();
        });
        state = graphed.dp->step_state();
      } else {
        in_x.copy_(x);
        in_y.copy_(y);
      }
      graph.replay();
      graphed.dp->restore_step_state(state);
      got = graph_loss.clone();
    }
    graphed.dp->finish_grad_sync();
    EXPECT_TRUE(torch::equal(got.cpu(), want.cpu())) << "iteration " << it;
    for (size_t i = 0; i < eager.model.params.size(); ++i)
      EXPECT_TRUE(torch::equal(graphed.dp->main_grad(i).cpu(), eager.dp->main_grad(i).cpu()))
          << eager.model.params[i].name << ", iteration " << it;
    EXPECT_EQ(graphed.dp->buckets_started(), eager.dp->buckets_started());
    eager.update();
    graphed.update();
  }
  EXPECT_EQ(graph.captures(), 1);
#endif
}

TEST(KernelsStepGraph, CaptureOnTheDefaultStreamIsRefused) {
#ifndef MEGATON_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  train::StepGraph graph;
  bool ran = false;
  try {
    graph.capture({1, 1.0}, [&] { ran = true; });
    FAIL() << "captured on the default stream";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("side stream"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(ran);
  EXPECT_FALSE(graph.holds({1, 1.0}));
#endif
}
