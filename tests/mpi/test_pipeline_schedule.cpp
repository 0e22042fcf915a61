// The pipeline schedules on a real GPT split over stages: 1F1B with PP = 2 and 4 (and TP = 2) over several
// micro-batches gives the loss and every parameter gradient of the whole model run on one rank (fp32, 1e-5), and
// visits each micro-batch's backward exactly once in order.
#include <torch/torch.h>

#include "model/gpt_stage.h"
#include "mpi_fixture.h"
#include "parallel/pipeline/schedules.h"
#include "parallel/self_communicator.h"
#include "test_model_mpi_util.h"

using namespace megaton;
namespace pl = megaton::parallel::pipeline;

namespace {

constexpr int kMicro = 5;
constexpr int64_t kB = 2, kS = 8;

torch::Tensor ids(int mb) { return modeltest::tokens(kB, kS, 100, mb); }
torch::Tensor labels(int mb) { return modeltest::tokens(kB, kS, 100, mb + 7); }
torch::Tensor mask(int mb) { return (torch::arange(kB * kS).view({kB, kS}) % (mb + 2) != 0).to(torch::kFloat32); }

// Runs one iteration of kMicro micro-batches; returns the mean loss on the last stage (0 elsewhere).
double run(model::GptStage& m, const dist::ProcessGroups& g, bool pipelined, std::vector<int>* backward_order) {
  double loss_sum = 0;
  pl::StageStep step;
  step.forward = [&](int mb, const torch::Tensor& input) {
    torch::Tensor out = m.forward(m.is_first_stage() ? ids(mb) : input);
    if (!m.is_last_stage()) return out;
    torch::Tensor loss = model::GptStage::masked_mean(m.token_losses(out, labels(mb)), mask(mb));
    loss_sum += loss.item<double>();
    return loss / double(kMicro);
  };
  step.before_backward = [&](int mb) {
    if (backward_order) backward_order->push_back(mb);
  };
  if (pipelined) {
    pl::P2p p2p(*g.pp, {kS, kB, m.config().hidden()}, torch::TensorOptions().dtype(torch::kFloat32));
    pl::forward_backward_1f1b(kMicro, p2p, step);
    model::all_reduce_tied_embedding_grads(m.params(), *g.embedding);
  } else {
    pl::forward_backward_no_pipelining(kMicro, step);
  }
  return loss_sum / kMicro;
}

void check(int tp, int pp) {
  auto c = modeltest::tiny_config("absolute");
  c.model.num_layers = 4;
  auto g = mpitest::cpu_groups(tp, pp);
  const auto local = parallel::single_rank_groups();
  model::GptStage m(c, g), ref(c, local);
  std::vector<int> order;
  const double loss = run(m, g, true, &order);
  const double ref_loss = run(ref, local, false, nullptr);
  bool ok = order.size() == size_t(kMicro);
  for (int i = 0; ok && i < kMicro; ++i) ok = order[i] == i;
  if (m.is_last_stage()) ok &= std::abs(loss - ref_loss) < 1e-6 * (1 + std::abs(ref_loss));
  std::string worst;
  int missing = 0;
  const double err = modeltest::worst_param_error(m.params(), ref.params(), *g.tp, true, &worst, &missing);
  EXPECT_TRUE(mpitest::all_ranks(ok && missing == 0)) << "TP=" << tp << " PP=" << pp << " loss " << loss << " vs "
                                                      << ref_loss;
  EXPECT_TRUE(mpitest::all_ranks(err < 1e-5)) << "TP=" << tp << " PP=" << pp << " worst grad " << worst << " " << err;
}

}  // namespace

TEST(PipelineSchedule, OneFOneBPp2MatchesOneRank) {
  REQUIRE_WORLD_DIVISIBLE_BY(2);
  check(1, 2);
}

TEST(PipelineSchedule, OneFOneBPp4MatchesOneRank) {
  REQUIRE_WORLD_DIVISIBLE_BY(4);
  check(1, 4);
}

TEST(PipelineSchedule, OneFOneBTp2Pp2MatchesOneRank) {
  REQUIRE_WORLD_DIVISIBLE_BY(4);
  check(2, 2);
}

TEST(PipelineSchedule, NoPipeliningMatchesManualAccumulation) {
  auto c = modeltest::tiny_config("absolute");
  const auto local = parallel::single_rank_groups();
  model::GptStage a(c, local), b(c, local);
  run(a, local, false, nullptr);
  for (int mb = 0; mb < kMicro; ++mb) {
    auto loss = model::GptStage::masked_mean(b.token_losses(b.forward(ids(mb)), labels(mb)), mask(mb));
    (loss / double(kMicro)).backward();
  }
  std::string worst;
  int missing = 0;
  dist::Communicator& tp = *local.tp;
  EXPECT_LT(modeltest::worst_param_error(a.params(), b.params(), tp, true, &worst, &missing), 1e-6) << worst;
}
