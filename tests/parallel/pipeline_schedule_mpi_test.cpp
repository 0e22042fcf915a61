// The pipeline schedules on a real GPT split over stages: 1F1B with PP = 2 and 4 (and TP = 2) over several
// micro-batches gives the loss and every parameter gradient of the whole model run on one rank (fp32, 1e-5), and
// visits each micro-batch's backward exactly once in order. The interleaved schedule (model chunks per rank,
// virtual stages) likewise at PP = 2 with 2 and 4 chunks, PP = 4 and TP = 2 x PP = 2, with M = PP (all forwards
// first) and M > PP, and forward-only gives the same losses; under DataParallel (small buckets, overlap, with and
// without ZeRO-1) each chunk's last backward starts its buckets and the reduced grads match one rank.
#include <torch/torch.h>

#include <map>

#include "core/error.h"
#include "dist/self_communicator.h"
#include "model/gpt_stage.h"
#include "model/model_mpi_test_util.h"
#include "parallel/data/data_parallel.h"
#include "parallel/pipeline/schedules.h"
#include "support/mpi_fixture.h"

using namespace megaton;
namespace pl = megaton::parallel::pipeline;

namespace {

constexpr int kMicro = 5;
constexpr int64_t kB = 2, kS = 8;

torch::Tensor ids(int mb) {
  return modeltest::tokens(kB, kS, 100, mb);
}
torch::Tensor labels(int mb) {
  return modeltest::tokens(kB, kS, 100, mb + 7);
}
torch::Tensor mask(int mb) {
  return (torch::arange(kB * kS).view({kB, kS}) % (mb + 2) != 0).to(torch::kFloat32);
}

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
  const auto local = dist::single_rank_groups();
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
  EXPECT_TRUE(mpitest::all_ranks(ok && missing == 0))
      << "TP=" << tp << " PP=" << pp << " loss " << loss << " vs " << ref_loss;
  EXPECT_TRUE(mpitest::all_ranks(err < 1e-5)) << "TP=" << tp << " PP=" << pp << " worst grad " << worst << " " << err;
}

// Interleaved: this rank's model chunks of `n` layers; returns the mean loss on the last stage (0 elsewhere).
double run_interleaved(std::vector<std::unique_ptr<model::GptStage>>& chunks, const dist::ProcessGroups& g, int micro,
                       bool forward_only, std::vector<std::vector<int>>* backward_order) {
  double loss_sum = 0;
  pl::ChunkedStep step;
  step.forward = [&](int chunk, int mb, const torch::Tensor& input) {
    model::GptStage& m = *chunks[size_t(chunk)];
    torch::Tensor out = m.forward(m.is_first_stage() ? ids(mb) : input);
    if (!m.is_last_stage()) return out;
    torch::Tensor loss = model::GptStage::masked_mean(m.token_losses(out, labels(mb)), mask(mb));
    loss_sum += loss.item<double>();
    return loss / double(micro);
  };
  step.before_backward = [&](int chunk, int mb) { (*backward_order)[size_t(chunk)].push_back(mb); };
  pl::P2p p2p(*g.pp, {kS, kB, chunks.front()->config().hidden()}, torch::TensorOptions().dtype(torch::kFloat32));
  pl::forward_backward_interleaved(micro, int(chunks.size()), p2p, step, forward_only);
  if (!forward_only) {
    parallel::ParamList all;
    for (auto& c : chunks) all.insert(all.end(), c->params().begin(), c->params().end());
    model::all_reduce_tied_embedding_grads(all, *g.embedding);
  }
  return loss_sum / micro;
}

void check_interleaved(int tp, int pp, int layers, int per_chunk, int micro) {
  auto c = modeltest::tiny_config("absolute");
  c.model.num_layers = layers;
  auto g = mpitest::cpu_groups(tp, pp);
  const auto local = dist::single_rank_groups();
  const int v = layers / (pp * per_chunk);
  std::vector<std::unique_ptr<model::GptStage>> chunks;
  std::shared_ptr<parallel::RngTracker> rng;
  for (int k = 0; k < v; ++k) {
    chunks.push_back(
        std::make_unique<model::GptStage>(c, g, model::virtual_stage_part(c, pp, g.coords.pp, k, per_chunk), rng));
    rng = chunks.back()->shared_rng();
  }
  model::GptStage ref(c, local);
  std::vector<std::vector<int>> order(size_t(v), std::vector<int>{});
  const double loss = run_interleaved(chunks, g, micro, false, &order);
  // Reference: micro micro-batches, forward + backward each, on one rank.
  double ref_loss = 0;
  for (int mb = 0; mb < micro; ++mb) {
    auto l = model::GptStage::masked_mean(ref.token_losses(ref.forward(ids(mb)), labels(mb)), mask(mb));
    ref_loss += l.item<double>();
    (l / double(micro)).backward();
  }
  ref_loss /= micro;
  const bool last = chunks.back()->is_last_stage();
  bool ok = true;
  for (const auto& o : order) {
    ok &= o.size() == size_t(micro);
    for (int i = 0; ok && i < micro; ++i) ok = o[size_t(i)] == i;
  }
  if (last) ok &= std::abs(loss - ref_loss) < 1e-6 * (1 + std::abs(ref_loss));
  parallel::ParamList all;
  for (auto& ch : chunks) all.insert(all.end(), ch->params().begin(), ch->params().end());
  std::string worst;
  int missing = 0;
  const double err = modeltest::worst_param_error(all, ref.params(), *g.tp, true, &worst, &missing);
  const std::string what = "TP=" + std::to_string(tp) + " PP=" + std::to_string(pp) + " V=" + std::to_string(v) +
                           " M=" + std::to_string(micro);
  EXPECT_TRUE(mpitest::all_ranks(ok && missing == 0)) << what << " loss " << loss << " vs " << ref_loss;
  EXPECT_TRUE(mpitest::all_ranks(err < 1e-5)) << what << " worst grad " << worst << " " << err;
  // Forward-only (evaluation) gives the same mean loss.
  std::vector<std::vector<int>> unused(static_cast<size_t>(v));
  const double eval = run_interleaved(chunks, g, micro, true, &unused);
  EXPECT_TRUE(mpitest::all_ranks(!last || std::abs(eval - ref_loss) < 1e-6 * (1 + std::abs(ref_loss))))
      << what << " forward-only " << eval << " vs " << ref_loss;
}

// Interleaved chunks under DataParallel with small buckets (overlap on): each chunk's last backward (micro-batch
// M - 1) completes its buckets, so by the end of the schedule every bucket but the tied embedding's has started its
// reduction; after finish_grad_sync the main grads (ZeRO-1: this rank's shard) are the DP-averaged full gradients.
void check_interleaved_dp(bool zero1) {
  auto c = modeltest::tiny_config("absolute");
  c.model.num_layers = 8;
  auto g = mpitest::cpu_groups(1, 2);
  const int pp = 2, n = 2, v = 2, micro = 4, d = g.coords.dp, dps = g.grid.dp_size();
  std::vector<std::unique_ptr<model::GptStage>> chunks;
  std::shared_ptr<parallel::RngTracker> rng;
  parallel::ParamList all;
  for (int k = 0; k < v; ++k) {
    chunks.push_back(std::make_unique<model::GptStage>(c, g, model::virtual_stage_part(c, pp, g.coords.pp, k, n), rng));
    rng = chunks.back()->shared_rng();
    all.insert(all.end(), chunks.back()->params().begin(), chunks.back()->params().end());
  }
  parallel::DataParallelOptions o;
  o.bucket_size_mb = 2000.0 * 4 / (1024.0 * 1024.0);  // ~2000 elements: many buckets, some spanning both chunks
  o.overlap_grad_reduce = true;
  o.zero1 = zero1;
  parallel::DataParallel dp(all, g, o);
  ASSERT_GT(dp.layout().buckets().size(), 4u);
  dp.zero_grad();
  pl::ChunkedStep step;
  step.forward = [&](int chunk, int mb, const torch::Tensor& input) {
    model::GptStage& m = *chunks[size_t(chunk)];
    const int sample = mb + 50 * d;  // each DP rank its own data
    torch::Tensor out = m.forward(m.is_first_stage() ? ids(sample) : input);
    if (!m.is_last_stage()) return out;
    return model::GptStage::masked_mean(m.token_losses(out, labels(sample)), mask(mb)) / double(micro);
  };
  step.before_backward = [&](int, int mb) { dp.set_last_microbatch(mb == micro - 1); };
  pl::P2p p2p(*g.pp, {kS, kB, c.hidden()}, torch::TensorOptions().dtype(torch::kFloat32));
  pl::forward_backward_interleaved(micro, v, p2p, step);
  int untied = 0;
  for (const auto& b : dp.layout().buckets()) untied += b.has_tied_embedding ? 0 : 1;
  EXPECT_EQ(dp.buckets_started(), untied) << "buckets not started from the hooks by the end of the schedule";
  dp.finish_grad_sync();

  const auto local = dist::single_rank_groups();
  model::GptStage ref(c, local);
  for (int q = 0; q < dps; ++q)
    for (int mb = 0; mb < micro; ++mb) {
      const int sample = mb + 50 * q;
      auto l = model::GptStage::masked_mean(ref.token_losses(ref.forward(ids(sample)), labels(sample)), mask(mb));
      (l / double(micro * dps)).backward();
    }
  std::map<std::string, torch::Tensor> want;
  for (const auto& p : ref.params()) want[p.name] = p.param.grad().reshape({-1});
  double worst = 0;
  std::string worst_name;
  for (const auto& piece : dp.shard_pieces()) {
    const auto& name = dp.params()[piece.param].name;
    auto got = dp.shard_grad().narrow(0, piece.buffer_offset, piece.numel);
    auto exp = want.at(name).narrow(0, piece.param_offset, piece.numel);
    const double e = (got - exp).abs().max().item<double>();
    if (e > worst) worst = e, worst_name = name;
  }
  EXPECT_TRUE(mpitest::all_ranks(worst < 1e-5))
      << "ZeRO-1 " << zero1 << " worst main grad " << worst_name << " " << worst;
}

}  // namespace

TEST(PipelineSchedule, InterleavedDataParallelBucketsMatchOneRank) {
  REQUIRE_WORLD_DIVISIBLE_BY(2);
  check_interleaved_dp(false);
  check_interleaved_dp(true);
}

TEST(PipelineSchedule, InterleavedPp2MatchesOneRank) {
  REQUIRE_WORLD_DIVISIBLE_BY(2);
  check_interleaved(1, 2, 4, 1, 2);  // M == PP: all forwards, then all backwards
  check_interleaved(1, 2, 4, 1, 6);
  check_interleaved(1, 2, 8, 1, 4);  // 4 chunks per rank
  check_interleaved(1, 2, 8, 2, 4);
}

TEST(PipelineSchedule, InterleavedPp4MatchesOneRank) {
  REQUIRE_WORLD_DIVISIBLE_BY(4);
  check_interleaved(1, 4, 8, 1, 8);
  check_interleaved(1, 4, 8, 1, 4);
}

TEST(PipelineSchedule, InterleavedTp2Pp2MatchesOneRank) {
  REQUIRE_WORLD_DIVISIBLE_BY(4);
  check_interleaved(2, 2, 4, 1, 4);
}

TEST(PipelineSchedule, InterleavedRefusesMicroBatchesNotMultipleOfPp) {
  REQUIRE_WORLD_DIVISIBLE_BY(2);
  auto c = modeltest::tiny_config("absolute");
  auto g = mpitest::cpu_groups(1, 2);
  pl::ChunkedStep step;
  step.forward = [](int, int, const torch::Tensor&) -> torch::Tensor { return {}; };
  pl::P2p p2p(*g.pp, {kS, kB, c.hidden()}, torch::TensorOptions().dtype(torch::kFloat32));
  EXPECT_THROW(pl::forward_backward_interleaved(3, 2, p2p, step), UsageError);  // thrown before any communication
}

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
  const auto local = dist::single_rank_groups();
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
