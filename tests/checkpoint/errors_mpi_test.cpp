// Bad checkpoints are refused on every rank with a CheckpointError that says what is wrong: flipped bytes (checksum),
// a truncated file, a deleted dataset (a rank's data missing), an unfinished save, a model that does not match
// (config, missing or extra tensors), a garbled tracker.
#include <hdf5.h>

#include <filesystem>
#include <fstream>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_test_model.h"
#include "checkpoint/format.h"
#include "support/mpi_fixture.h"

using namespace megaton;
using namespace megaton::ckpttest;
namespace fs = std::filesystem;

namespace {

struct Saved {
  std::string dir;
  std::string file;
};

Saved save_small(const std::string& tag, int tp) {
  Saved s;
  s.dir = shared_tmpdir(tag);
  s.file = checkpoint::checkpoint_file(s.dir, 4);
  Logger log(mpitest::world_rank(), mpitest::world_size(), LogLevel::kError);
  auto g = mpitest::cpu_groups(tp, 1);
  auto params = local_params(g, torch::kFloat32, false);
  auto optim = local_optim(params, g.coords.tp, tp, false);
  checkpoint::CheckpointState st;
  st.iteration = 4;
  st.model_config = {{"num_layers", kLayers}, {"hidden_size", kHidden}};
  checkpoint::save_checkpoint(s.dir, st, params, &optim, nullptr, g, {}, log);
  return s;
}

/// Loads at TP=tp, PP=1 and returns the error message (every rank must throw; "" if none did).
std::string load_error(const std::string& dir, int tp, const checkpoint::LoadOptions& lo = {},
                       void (*edit)(parallel::ParamList&) = nullptr) {
  Logger log(mpitest::world_rank(), mpitest::world_size(), LogLevel::kError);
  auto g = mpitest::cpu_groups(tp, 1);
  auto params = local_params(g, torch::kFloat32, true);
  if (edit) edit(params);
  checkpoint::OptimState optim;
  std::string msg;
  try {
    checkpoint::load_checkpoint(dir, params, &optim, nullptr, g, lo, log);
  } catch (const CheckpointError& e) {
    msg = e.what();
  }
  EXPECT_TRUE(mpitest::all_ranks(!msg.empty())) << "some rank did not throw";
  return msg;
}

/// On rank 0 only, runs `fn` on the checkpoint file; everyone waits.
template <typename F>
void on_rank0(F fn) {
  checkpoint::sleepy_barrier();
  if (mpitest::world_rank() == 0) fn();
  checkpoint::sleepy_barrier();
}

int tp_for_world() {
  return mpitest::world_size() % 2 == 0 ? 2 : 1;
}

}  // namespace

TEST(CheckpointErrors, FlippedBytesFailTheChecksum) {
  const int tp = tp_for_world();
  auto s = save_small("flip", tp);
  on_rank0([&] {
    hid_t f = H5Fopen(s.file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "model/layers.1.mlp.fc2.weight", H5P_DEFAULT);
    const haddr_t off = H5Dget_offset(d);
    H5Dclose(d);
    H5Fclose(f);
    std::fstream io(s.file, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(static_cast<std::streamoff>(off) + 20);
    const char junk[4] = {1, 2, 3, 4};
    io.write(junk, 4);
  });
  const std::string msg = load_error(s.dir, tp);
  EXPECT_NE(msg.find("checksum mismatch"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model/layers.1.mlp.fc2.weight"), std::string::npos) << msg;
  // Loading at another layout detects it too (the checksum does not depend on the split).
  EXPECT_NE(load_error(s.dir, 1).find("checksum mismatch"), std::string::npos);
  remove_shared(s.dir);
}

TEST(CheckpointErrors, TruncatedFileIsRefused) {
  auto s = save_small("trunc", 1);
  on_rank0([&] { fs::resize_file(s.file, fs::file_size(s.file) / 2); });
  const std::string msg = load_error(s.dir, 1);
  EXPECT_NE(msg.find("cannot open as an HDF5 checkpoint"), std::string::npos) << msg;
  EXPECT_NE(msg.find(s.file), std::string::npos) << msg;
  remove_shared(s.dir);
}

TEST(CheckpointErrors, DeletedDatasetIsNamed) {
  auto s = save_small("deleted", 1);
  on_rank0([&] {
    hid_t f = H5Fopen(s.file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    H5Ldelete(f, "optim/exp_avg/layers.2.attention.qkv.weight", H5P_DEFAULT);
    H5Fclose(f);
  });
  const std::string msg = load_error(s.dir, 1);
  EXPECT_NE(msg.find("optim/exp_avg/layers.2.attention.qkv.weight"), std::string::npos) << msg;
  remove_shared(s.dir);
}

TEST(CheckpointErrors, UnfinishedSaveIsRefused) {
  auto s = save_small("unfinished", 1);
  on_rank0([&] {
    hid_t f = H5Fopen(s.file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    H5Adelete(f, "complete");
    H5Fclose(f);
  });
  EXPECT_NE(load_error(s.dir, 1).find("incomplete checkpoint"), std::string::npos);
  remove_shared(s.dir);
}

TEST(CheckpointErrors, ModelMismatchesAreListed) {
  const int tp = tp_for_world();
  auto s = save_small("mismatch", tp);
  checkpoint::LoadOptions lo;
  lo.expected_model_config = {{"num_layers", kLayers}, {"hidden_size", 2 * kHidden}};
  std::string msg = load_error(s.dir, tp, lo);
  EXPECT_NE(msg.find("hidden_size: checkpoint has 8, this run has 16"), std::string::npos) << msg;
  // The model has a tensor the checkpoint lacks, and a wrong shape.
  msg = load_error(s.dir, tp, {}, [](parallel::ParamList& ps) {
    parallel::ParamInfo extra = ps.back();
    extra.name = "layers.9.mlp.fc1.weight";
    ps.push_back(extra);
  });
  EXPECT_NE(msg.find("'model/layers.9.mlp.fc1.weight' [8] is missing from the checkpoint"), std::string::npos) << msg;
  // The checkpoint has a tensor the model lacks (strict).
  msg = load_error(s.dir, tp, {}, [](parallel::ParamList& ps) { ps.erase(ps.begin() + 1); });
  EXPECT_NE(msg.find("'model/embedding.position_embeddings.weight' is in the checkpoint but not in the model"),
            std::string::npos)
      << msg;
  remove_shared(s.dir);
}

TEST(CheckpointErrors, GarbledTrackerAndMissingDirectory) {
  auto s = save_small("tracker", 1);
  on_rank0([&] { std::ofstream(s.dir + "/latest") << "iteration twelve\n"; });
  std::string msg = load_error(s.dir, 1);
  EXPECT_NE(msg.find("expected an iteration number or 'release', found 'iteration twelve'"), std::string::npos) << msg;
  on_rank0([&] { std::ofstream(s.dir + "/latest") << "9\n"; });
  msg = load_error(s.dir, 1);
  EXPECT_NE(msg.find("iteration 9 has no file"), std::string::npos) << msg;
  remove_shared(s.dir);
}
