// --fp8-format's amax reduction (TrainingModel::update_fp8_scaling): at TP = 2 with the rest of the world as DP, every
// rank ends an iteration with the same FP8 scales, and they are the scales one rank computes from the whole batch with
// the whole model (its amaxes are the maxima over every TP shard and every DP rank's samples).
#include <torch/torch.h>

#include "core/log.h"
#include "dist/self_communicator.h"
#include "model/model_test_util.h"
#include "support/mpi_fixture.h"
#include "train/training_model.h"

using namespace megaton;

namespace {

// This DP rank's samples: token ids [2, s].
torch::Tensor samples_of(int dp_rank, const model::GptConfig& c) {
  return modeltest::tokens(2, c.model.seq_length, c.vocab_size, 100 + dp_rank);
}

void train_once(train::TrainingModel& m, const torch::Tensor& ids) {
  model::GptStage& stage = m.chunk(0);
  const torch::Tensor labels = ids.roll(-1, 1);
  const torch::Tensor mask = torch::ones(labels.sizes());
  model::GptStage::masked_mean(stage.token_losses(stage.forward(ids), labels), mask).backward();
}

}  // namespace

TEST(Fp8ScalingParallel, ScalesAgreeAcrossTpAndDpAndMatchOneRankOnTheWholeBatch) {
  REQUIRE_WORLD_DIVISIBLE_BY(2);
  model::GptConfig c = modeltest::tiny_config();
  c.fp8.format = "hybrid";
  const Logger log;
  auto groups = mpitest::cpu_groups(2, 1);  // TP = 2, DP = world / 2
  train::TrainingModel model(c, groups, 0, log);
  train_once(model, samples_of(groups.coords.dp, c));
  model.update_fp8_scaling();
  const ops::fp8::ScalingTable& table = *model.chunk(0).fp8_table();
  const torch::Tensor scale = table.scale().contiguous();  // [slots]
  ASSERT_GT(scale.numel(), 0);
  torch::Tensor all = torch::empty({groups.world->size() * scale.numel()}, scale.options());
  groups.world->all_gather(all, scale);
  for (int r = 1; r < groups.world->size(); ++r)
    EXPECT_TRUE(all.narrow(0, r * scale.numel(), scale.numel()).equal(scale)) << "rank " << r << "'s scales differ";
  EXPECT_FALSE(scale.eq(1.0f).all().item<bool>()) << "no scale was updated";

  // One rank, the TP = 1 model, every DP rank's samples.
  const auto local = dist::single_rank_groups();
  train::TrainingModel one(c, local, 0, log);
  for (int d = 0; d < groups.grid.dp_size(); ++d) train_once(one, samples_of(d, c));
  one.update_fp8_scaling();
  const ops::fp8::ScalingTable& ref = *one.chunk(0).fp8_table();
  ASSERT_EQ(ref.names(), table.names());
  EXPECT_TRUE(torch::allclose(scale, ref.scale(), 1e-5, 0)) << "scales " << scale << " vs one rank's " << ref.scale();
}
