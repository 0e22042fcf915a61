// Bad checkpoints are refused on every rank with a CheckpointError that says what is wrong: flipped bytes (checksum),
// a truncated file, a deleted dataset (a rank's data missing), an unfinished save, a model that does not match
// (config, missing or extra tensors), a garbled tracker.
#include <hdf5.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_test_model.h"
#include "checkpoint/collective.h"
#include "checkpoint/file.h"
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
  on_rank0([&] {  // both trackers (when only one names a missing iteration, the other's is loaded with a warning)
    std::ofstream(s.dir + "/latest") << "9\n";
    std::ofstream(s.dir + "/latest_checkpointed_iteration.txt") << "9\n";
  });
  msg = load_error(s.dir, 1);
  EXPECT_NE(msg.find("iteration 9 has no file"), std::string::npos) << msg;
  remove_shared(s.dir);
}

TEST(CheckpointErrors, EditedMetadataFailsVerification) {
  auto s = save_small("meta", 1);
  // One digit of the stored model config changed in place (same length): the blob's CRC-32 no longer matches.
  on_rank0([&] {
    hid_t f = H5Fopen(s.file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "meta/model_config.json", H5P_DEFAULT);
    const haddr_t off = H5Dget_offset(d);
    const hsize_t n = H5Dget_storage_size(d);
    H5Dclose(d);
    H5Fclose(f);
    std::fstream io(s.file, std::ios::in | std::ios::out | std::ios::binary);
    std::string text(n, '\0');
    io.seekg(static_cast<std::streamoff>(off));
    io.read(text.data(), static_cast<std::streamsize>(n));
    const size_t digit = text.find_first_of("0123456789");
    ASSERT_NE(digit, std::string::npos) << text;
    text[digit] = text[digit] == '9' ? '8' : static_cast<char>(text[digit] + 1);
    io.seekp(static_cast<std::streamoff>(off));
    io.write(text.data(), static_cast<std::streamsize>(n));
  });
  const std::string msg = load_error(s.dir, 1);
  EXPECT_NE(msg.find("metadata fails verification"), std::string::npos) << msg;
  EXPECT_NE(msg.find("meta/model_config.json"), std::string::npos) << msg;
  if (mpitest::world_rank() == 0) {
    const auto problems = checkpoint::CheckpointFile(s.file).verify();
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(problems[0].path, "meta/model_config.json");
  }
  remove_shared(s.dir);
}

TEST(CheckpointErrors, NonFiniteStateIsRefusedOrFlagged) {
  const std::string dir = shared_tmpdir("nonfinite");
  Logger log(mpitest::world_rank(), mpitest::world_size(), LogLevel::kError);
  auto g = mpitest::cpu_groups(1, 1);
  auto params = local_params(g, torch::kFloat32, false);
  auto optim = local_optim(params, 0, 1, false);
  checkpoint::CheckpointState st;
  st.iteration = 3;
  checkpoint::SaveOptions so;
  so.keep_last = 1;
  so.refuse_nonfinite = true;
  checkpoint::save_checkpoint(dir, st, params, &optim, nullptr, g, so, log);  // finite: saved
  {
    torch::NoGradGuard ng;
    params[1].param.view(-1)[0] = std::numeric_limits<float>::quiet_NaN();
  }
  st.iteration = 4;
  std::string msg;
  try {
    checkpoint::save_checkpoint(dir, st, params, &optim, nullptr, g, so, log);
  } catch (const CheckpointError& e) {
    msg = e.what();
  }
  EXPECT_TRUE(mpitest::all_ranks(!msg.empty())) << "some rank saved a NaN state";
  EXPECT_NE(msg.find("non-finite"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model/" + params[1].name), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(dir + "/iter_0000004"));
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  // Not refused: saved and flagged, and --keep-last 1 keeps the finite iteration 3 beside it.
  so.refuse_nonfinite = false;
  checkpoint::save_checkpoint(dir, st, params, &optim, nullptr, g, so, log);
  EXPECT_TRUE(fs::exists(dir + "/iter_0000003"));
  EXPECT_TRUE(fs::exists(dir + "/iter_0000004"));
  if (mpitest::world_rank() == 0) {
    const auto problems = checkpoint::CheckpointFile(checkpoint::checkpoint_file(dir, 4)).verify();
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(problems[0].path, "model/" + params[1].name);
    EXPECT_NE(problems[0].what.find("1 non-finite"), std::string::npos) << problems[0].what;
  }
  remove_shared(dir);
}
