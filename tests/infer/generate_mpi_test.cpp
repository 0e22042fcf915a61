// Generation under TP x PP (hidden states passed stage to stage, the token broadcast from the last stage) gives the
// tokens of the single-rank model with the same seed, with and without the KV cache; and zero-shot evaluation under
// TP x PP x DP gives the single-rank loss sum and accuracy.
#include <torch/torch.h>

#include "dist/self_communicator.h"
#include "eval/evaluator.h"
#include "eval/lm_windows.h"
#include "infer/generator.h"
#include "infer/infer_test_util.h"
#include "infer/stage_runner.h"
#include "model/gpt_stage.h"
#include "support/mpi_fixture.h"

using namespace megaton;

namespace {

const std::vector<std::pair<int, int>> kLayouts{{1, 1}, {2, 1}, {1, 2}, {2, 2}, {4, 1}, {1, 4}, {2, 4}};

infer::GenerateResult gen(model::GptStage& m, const dist::ProcessGroups& g, bool recompute, bool greedy) {
  infer::StageRunner runner(m, g);
  infer::GenerateOptions o;
  o.sampling.greedy = greedy;
  o.sampling.top_k = 4;
  o.seq_length = m.config().model.seq_length;
  o.recompute = recompute;
  o.eos_id = 256;
  o.pad_id = 256;
  auto rng = at::detail::createCPUGenerator(11);
  return infer::generate(runner, {{1, 2, 3}, {50, 60, 70, 80, 90}}, o, rng);
}

}  // namespace

TEST(GenerateParallel, TensorAndPipelineParallelTokensEqualSingleRank) {
  const auto local = dist::single_rank_groups();
  for (size_t li = 0; li < kLayouts.size(); ++li) {
    const auto [tp, pp] = kLayouts[li];
    if (mpitest::world_size() % (tp * pp) != 0) continue;
    {
      const char* positions = li % 2 ? "absolute" : "alibi";  // both kinds, alternating, to keep the test short
      auto c = infertest::byte_config(positions);
      c.model.num_layers = 4;
      c.model.seq_length = 12;
      auto g = mpitest::cpu_groups(tp, pp);
      model::GptStage m(c, g), ref(c, local);
      for (bool recompute : {false, true}) {
        auto mine = gen(m, g, recompute, true);
        auto want = gen(ref, local, false, true);
        const bool ok = torch::equal(mine.tokens, want.tokens) && mine.lengths == want.lengths;
        EXPECT_TRUE(mpitest::all_ranks(ok))
            << "tp=" << tp << " pp=" << pp << " " << positions << " recompute=" << recompute << "\n"
            << mine.tokens << "\n"
            << want.tokens;
      }
      // Sampling: the last stage's draw reaches every rank (all ranks hold the same tokens).
      auto sampled = gen(m, g, false, false);
      torch::Tensor t = sampled.tokens.clone(), first = t.clone();
      g.world->broadcast(first, 0);
      EXPECT_TRUE(mpitest::all_ranks(torch::equal(t, first))) << "tp=" << tp << " pp=" << pp;
    }
  }
}

TEST(EvalParallel, LossAndAccuracyEqualSingleRank) {
  const auto local = dist::single_rank_groups();
  std::vector<int32_t> toks(70);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<int32_t>((i * 53 + 7) % 257);
  for (const auto& [tp, pp] : kLayouts) {
    if (mpitest::world_size() % (tp * pp) != 0) continue;
    auto c = infertest::byte_config("rotary", "swiglu");
    c.model.num_layers = 4;
    auto g = mpitest::cpu_groups(tp, pp);
    model::GptStage m(c, g), ref(c, local);
    infer::StageRunner runner(m, g), ref_runner(ref, local);
    eval::LmWindows w(toks, c.model.seq_length, 256, 6);
    auto win = [&](int64_t i) { return w.window(i); };
    auto got = eval::evaluate_loss(runner, w.size(), win, 2);
    auto want = eval::evaluate_loss(ref_runner, w.size(), win, 3);
    const bool ok = got.scored == want.scored && std::abs(got.loss_sum - want.loss_sum) <= 1e-5 * want.loss_sum;
    EXPECT_TRUE(mpitest::all_ranks(ok)) << "tp=" << tp << " pp=" << pp << " dp=" << g.grid.dp_size() << ": "
                                        << got.loss_sum << " vs " << want.loss_sum;
    // Accuracy over the same windows (every scored target must be the argmax: mostly wrong for a random model,
    // but the count must match).
    auto acc = eval::evaluate_accuracy(runner, w.size(), win, 2);
    auto acc_ref = eval::evaluate_accuracy(ref_runner, w.size(), win, 1);
    EXPECT_TRUE(
        mpitest::all_ranks(acc.correct == acc_ref.correct && acc.total == acc_ref.total && acc.total == w.size()));
  }
}
