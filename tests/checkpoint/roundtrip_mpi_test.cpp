// Universal checkpoints across layouts: a synthetic model saved at every TP x PP layout the world allows and loaded
// at every other; each local shard must equal the slice of the global tensor (bit-exact, bf16 weights and fp32
// optimizer state), vocabulary padding rows restored when the padded size matches and zero otherwise, RNG states
// restored only at the same layout.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_test_model.h"
#include "checkpoint/format.h"
#include "checkpoint/tracker.h"
#include "support/mpi_fixture.h"

using namespace megaton;
using namespace megaton::ckpttest;
namespace fs = std::filesystem;

namespace {

std::vector<std::pair<int, int>> layouts(int world) {
  std::vector<std::pair<int, int>> out;
  for (int tp : {1, 2, 4})
    for (int pp : {1, 2, 4})
      if (world % (tp * pp) == 0) out.push_back({tp, pp});
  return out;
}

checkpoint::CheckpointState make_state(int64_t it) {
  checkpoint::CheckpointState st;
  st.iteration = it;
  st.state = {{"consumed_train_samples", 64 * it},
              {"lr_scheduler", {{"num_steps", it}, {"max_lr", 3e-4}}},
              {"loss_scaler", {{"scale", 65536.0}}}};
  st.model_config = {{"num_layers", kLayers}, {"hidden_size", kHidden}, {"num_attention_heads", kHeads}};
  st.args = {{"seed", 1234}};
  return st;
}

void save_at(const std::string& dir, int tp, int pp, int64_t it, const checkpoint::SaveOptions& so = {}) {
  Logger log(mpitest::world_rank(), mpitest::world_size(), LogLevel::kWarning);
  auto g = mpitest::cpu_groups(tp, pp);
  auto params = local_params(g, torch::kBFloat16, false);
  auto optim = local_optim(params, g.coords.tp, tp, false);
  auto rng = local_rng(g.rank);
  checkpoint::save_checkpoint(dir, make_state(it), params, &optim, &rng, g, so, log);
}

// Checks every local shard after a load at (tp, pp) of a checkpoint saved with padded vocab `saved_padded`.
void expect_loaded(const dist::ProcessGroups& g, const parallel::ParamList& params, const checkpoint::OptimState& optim,
                   int64_t saved_padded, const std::string& what) {
  const int tp = g.grid.tp_size();
  for (const auto& p : params) {
    auto full = global_value(p.name, p.global_shape, "model");
    if (p.global_unpadded_rows > 0 && saved_padded != p.global_shape[0])
      full.narrow(0, p.global_unpadded_rows, p.global_shape[0] - p.global_unpadded_rows).zero_();
    auto want = shard_of(full, p.partition_dim, g.coords.tp, tp).to(torch::kBFloat16);
    EXPECT_TRUE(torch::equal(p.param.reshape(want.sizes()), want))
        << what << ": model '" << p.name << "' on rank " << g.rank;
    for (const auto& s : optim_states()) {
      auto o = global_value(p.name, p.global_shape, s);
      if (p.global_unpadded_rows > 0 && saved_padded != p.global_shape[0])
        o.narrow(0, p.global_unpadded_rows, p.global_shape[0] - p.global_unpadded_rows).zero_();
      auto owant = shard_of(o, p.partition_dim, g.coords.tp, tp);
      EXPECT_TRUE(torch::equal(optim.at(s).at(p.name).reshape(owant.sizes()), owant))
          << what << ": " << s << " '" << p.name << "' on rank " << g.rank;
    }
  }
}

}  // namespace

TEST(CheckpointRoundtrip, EveryLayoutLoadsEveryLayout) {
  const int world = mpitest::world_size();
  const auto ls = layouts(world);
  const std::string root = shared_tmpdir("xlayout");
  for (auto [stp, spp] : ls) save_at(root + "/s" + std::to_string(stp) + "x" + std::to_string(spp), stp, spp, 7);
  Logger log(mpitest::world_rank(), world, LogLevel::kError);
  // Each saved layout is loaded at itself and at two others (cyclic shifts of the list), so that every layout is
  // both saved and loaded across a change, while the test stays fast at 8 ranks.
  const size_t n = ls.size();
  for (size_t i = 0; i < n; ++i) {
    auto [stp, spp] = ls[i];
    const std::string dir = root + "/s" + std::to_string(stp) + "x" + std::to_string(spp);
    std::set<size_t> targets = {i, (i + 1) % n, (i + n / 2) % n};
    for (size_t j : targets) {
      auto [ltp, lpp] = ls[j];
      const std::string what = "saved TP" + std::to_string(stp) + " PP" + std::to_string(spp) + ", loaded TP" +
                               std::to_string(ltp) + " PP" + std::to_string(lpp);
      auto g = mpitest::cpu_groups(ltp, lpp);
      auto params = local_params(g, torch::kBFloat16, true);
      checkpoint::OptimState optim;  // the loader allocates every state
      checkpoint::RngState rng;
      checkpoint::LoadOptions lo;
      lo.expected_model_config = {{"num_layers", kLayers}, {"hidden_size", kHidden}};
      auto r = checkpoint::load_checkpoint(dir, params, &optim, &rng, g, lo, log);
      ASSERT_TRUE(r.has_value()) << what;
      EXPECT_EQ(r->iteration, 7);
      EXPECT_EQ(r->meta.state["consumed_train_samples"], 64 * 7) << what;
      EXPECT_EQ(r->saved_layout.tp, stp);
      EXPECT_EQ(r->saved_layout.pp, spp);
      EXPECT_TRUE(r->optim_loaded);
      expect_loaded(g, params, optim, padded_vocab(stp), what);
      const bool same = stp == ltp && spp == lpp;
      EXPECT_EQ(r->rng_loaded, same) << what;
      if (same) {
        auto want = local_rng(g.rank);
        EXPECT_TRUE(torch::equal(rng.at("cpu"), want.at("cpu"))) << what;
        EXPECT_TRUE(torch::equal(rng.at("cuda"), want.at("cuda"))) << what;
      }
    }
  }
  remove_shared(root);
}

TEST(CheckpointRoundtrip, PreallocatedOptimizerTensorsAreFilledInPlace) {
  const int world = mpitest::world_size();
  const int tp = world % 2 == 0 ? 2 : 1;
  const std::string dir = shared_tmpdir("inplace");
  save_at(dir, tp, 1, 3);
  Logger log(mpitest::world_rank(), world, LogLevel::kWarning);
  auto g = mpitest::cpu_groups(tp, 1);
  auto params = local_params(g, torch::kBFloat16, true);
  auto optim = local_optim(params, g.coords.tp, tp, true);
  const void* before = optim.at("exp_avg").begin()->second.data_ptr();
  auto r = checkpoint::load_checkpoint(dir, params, &optim, nullptr, g, {}, log);
  ASSERT_TRUE(r);
  EXPECT_EQ(optim.at("exp_avg").begin()->second.data_ptr(), before);
  expect_loaded(g, params, optim, padded_vocab(tp), "in place");
  remove_shared(dir);
}

TEST(CheckpointRoundtrip, TrackerKeepLastAndResave) {
  const int world = mpitest::world_size();
  const std::string dir = shared_tmpdir("keep");
  checkpoint::SaveOptions so;
  so.keep_last = 2;
  for (int64_t it : {10, 20, 30}) save_at(dir, 1, 1, it, so);
  save_at(dir, 1, 1, 30, so);  // the same iteration again replaces it
  if (mpitest::world_rank() == 0) {
    EXPECT_EQ(checkpoint::list_checkpoints(dir), (std::vector<int64_t>{20, 30}));
    EXPECT_EQ(checkpoint::read_latest_iteration(dir), 30);
    std::ifstream in(dir + "/latest_checkpointed_iteration.txt");
    std::string s;
    in >> s;
    EXPECT_EQ(s, "30");
    EXPECT_TRUE(checkpoint::stale_temporaries(dir).empty());
  }
  // An explicit older iteration loads that one.
  Logger log(mpitest::world_rank(), world, LogLevel::kWarning);
  auto g = mpitest::cpu_groups(1, 1);
  auto params = local_params(g, torch::kBFloat16, true);
  checkpoint::LoadOptions lo;
  lo.iteration = 20;
  lo.load_optim = false;
  auto r = checkpoint::load_checkpoint(dir, params, nullptr, nullptr, g, lo, log);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->iteration, 20);
  EXPECT_FALSE(r->optim_loaded);
  remove_shared(dir);
}

TEST(CheckpointRoundtrip, FreshStartFinetuneAndNoOptim) {
  const int world = mpitest::world_size();
  Logger log(mpitest::world_rank(), world, LogLevel::kError);
  const std::string dir = shared_tmpdir("finetune");
  auto g = mpitest::cpu_groups(1, 1);
  auto params = local_params(g, torch::kBFloat16, true);
  // Nothing saved yet: a fresh start.
  EXPECT_FALSE(checkpoint::load_checkpoint(dir + "/none", params, nullptr, nullptr, g, {}, log).has_value());
  // Saved without optimizer state.
  {
    auto sp = local_params(g, torch::kBFloat16, false);
    checkpoint::SaveOptions so;
    so.save_optim = false;
    so.save_rng = false;
    checkpoint::save_checkpoint(dir, make_state(5), sp, nullptr, nullptr, g, so, log);
  }
  checkpoint::OptimState optim;
  checkpoint::RngState rng;
  EXPECT_THROW(checkpoint::load_checkpoint(dir, params, &optim, &rng, g, {}, log), CheckpointError);
  checkpoint::LoadOptions ft;
  ft.finetune = true;
  auto r = checkpoint::load_checkpoint(dir, params, &optim, &rng, g, ft, log);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->iteration, 0);
  EXPECT_EQ(r->saved_iteration, 5);
  EXPECT_TRUE(r->meta.state.empty());
  EXPECT_FALSE(r->optim_loaded);
  EXPECT_FALSE(r->rng_loaded);
  for (const auto& p : params) {
    auto want = global_value(p.name, p.global_shape, "model");
    auto w = shard_of(want, p.partition_dim, 0, 1).to(torch::kBFloat16);
    EXPECT_TRUE(torch::equal(p.param.reshape(w.sizes()), w)) << p.name;
  }
  remove_shared(dir);
}

TEST(CheckpointRoundtrip, SaveAndLoadReportProgressOnRankZero) {
  // A report before every tensor (progress_every_s = 0): rank 0 logs the share done, the rate and the ETA in GB.
  const int world = mpitest::world_size();
  const std::string dir = shared_tmpdir("progress");
  std::ostringstream out;
  Logger log(mpitest::world_rank(), world, LogLevel::kInfo, &out);
  auto g = mpitest::cpu_groups(1, 1);
  auto params = local_params(g, torch::kBFloat16, false);
  auto optim = local_optim(params, 0, 1, false);
  checkpoint::SaveOptions so;
  so.progress_every_s = 0;
  checkpoint::save_checkpoint(dir, make_state(2), params, &optim, nullptr, g, so, log);
  checkpoint::LoadOptions lo;
  lo.progress_every_s = 0;
  ASSERT_TRUE(checkpoint::load_checkpoint(dir, params, &optim, nullptr, g, lo, log));
  const std::string text = out.str();
  if (mpitest::world_rank() == 0) {
    EXPECT_NE(text.find("checkpoint: saving iteration 2:   0.0% 0.00/"), std::string::npos) << text;
    EXPECT_NE(text.find("checkpoint: loading "), std::string::npos) << text;
    EXPECT_NE(text.find(" GB/s, elapsed 0:00:"), std::string::npos) << text;
    EXPECT_NE(text.find(", ETA "), std::string::npos) << text;
  } else {
    EXPECT_EQ(text.find("checkpoint: saving iteration"), std::string::npos) << text;
  }
  remove_shared(dir);
}
