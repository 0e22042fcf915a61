// Checkpoint probe for the shell tests (tests/checkpoint/*_test.sh), run under mpirun:
//   ckpt_probe save DIR TP ITER          save the synthetic model at TP x PP=1 (iteration ITER)
//   ckpt_probe save-then-big DIR TP MB   save iteration 1, then iteration 2 with an extra MB-per-rank tensor (slow,
//                                        so that the test can SIGKILL the job in the middle; pids in DIR/pid.<rank>)
//   ckpt_probe load DIR TP ITER [DTYPE]  load the latest checkpoint at TP x PP=1; exit 0 iff it is iteration ITER
//                                        and every shard equals the saved values (DTYPE: bfloat16 or float32 model)
//   ckpt_probe corrupt FILE DATASET      flip 4 bytes inside DATASET's data (serial, no MPI needed)
#include <hdf5.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_test_model.h"
#include "checkpoint/format.h"
#include "core/error.h"
#include "dist/guarded_run.h"

using namespace megaton;
using namespace megaton::ckpttest;

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

dist::ProcessGroups groups(int tp) {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return dist::build_process_groups(dist::RankGrid(n, tp, 1), dist::Backend::kMpi, 300.0);
}

checkpoint::CheckpointState state(int64_t it) {
  checkpoint::CheckpointState st;
  st.iteration = it;
  st.state = {{"consumed_train_samples", 32 * it}};
  st.model_config = {{"num_layers", kLayers},
                     {"hidden_size", kHidden},
                     {"num_attention_heads", kHeads},
                     {"ffn_hidden_size", kFfn},
                     {"vocab_size", kVocab},
                     {"kv_channels", kHidden / kHeads},
                     {"max_position_embeddings", kPositions},
                     {"position_embedding_type", "absolute"}};
  return st;
}

void save(const std::string& dir, int tp, int64_t it, int64_t extra_mb) {
  Logger log(world_rank(), 1, LogLevel::kInfo);
  auto g = groups(tp);
  auto params = local_params(g, torch::kBFloat16, false);
  if (extra_mb > 0) {
    parallel::ParamInfo big;
    big.name = "big.weight";
    const int64_t rows = extra_mb * 1024 * 1024 / 4 / 1024;  // fp32 [rows, 1024] per TP rank
    big.global_shape = {rows * tp, 1024};
    big.partition_dim = 0;
    big.param = torch::rand({rows, 1024});
    params.push_back(big);
  }
  auto optim = local_optim(params, g.coords.tp, tp, false);
  auto rng = local_rng(g.rank);
  checkpoint::save_checkpoint(dir, state(it), params, &optim, &rng, g, {}, log);
}

int load(const std::string& dir, int tp, int64_t want_it, torch::ScalarType dtype) {
  Logger log(world_rank(), 1, LogLevel::kInfo);
  auto g = groups(tp);
  auto params = local_params(g, dtype, true);
  checkpoint::OptimState optim;
  checkpoint::LoadOptions lo;
  lo.load_optim = false;
  lo.expected_model_config = state(0).model_config;
  auto r = checkpoint::load_checkpoint(dir, params, &optim, nullptr, g, lo, log);
  int bad = !r || r->iteration != want_it;
  for (const auto& p : params) {
    auto want = shard_of(global_value(p.name, p.global_shape, "model"), p.partition_dim, g.coords.tp, tp)
                    .to(torch::kBFloat16)
                    .to(dtype);
    auto got = p.param.detach().reshape(want.sizes()).clone();
    if (p.global_unpadded_rows > 0) {  // compare real rows only: padding depends on the saving layout
      const int64_t L = got.size(0), begin = g.coords.tp * L;
      const int64_t real = std::clamp<int64_t>(p.global_unpadded_rows - begin, 0, L);
      got.narrow(0, real, L - real).zero_();
      want.narrow(0, real, L - real).zero_();
    }
    if (!torch::equal(got, want)) {
      std::cerr << "rank " << g.rank << ": '" << p.name << "' differs\n";
      bad = 1;
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (world_rank() == 0)
    std::cout << (bad ? "LOAD FAILED" : "LOADED OK") << " iteration " << (r ? r->iteration : -2) << std::endl;
  return bad;
}

int corrupt(const std::string& file, const std::string& dataset) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  if (f < 0 || d < 0) return 2;
  const haddr_t off = H5Dget_offset(d);
  H5Dclose(d);
  H5Fclose(f);
  std::fstream io(file, std::ios::in | std::ios::out | std::ios::binary);
  io.seekp(static_cast<std::streamoff>(off) + 8);
  const char junk[4] = {0x5a, 0x5a, 0x5a, 0x5a};
  io.write(junk, 4);
  return io ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: ckpt_probe save|save-then-big|load|corrupt ...\n");
    return 2;
  }
  const std::string mode = argv[1];
  if (mode == "corrupt") return argc == 4 ? corrupt(argv[2], argv[3]) : 2;
  MPI_Init(&argc, &argv);
  const int rc = dist::guarded_run([&] {
    const std::string dir = argv[2];
    const int tp = argc > 3 ? std::atoi(argv[3]) : 1;
    if (mode == "save") {
      save(dir, tp, argc > 4 ? std::atoll(argv[4]) : 1, 0);
      return 0;
    }
    if (mode == "save-then-big") {
      save(dir, tp, 1, 0);
      std::ofstream(dir + "/pid." + std::to_string(world_rank())) << ::getpid() << "\n";
      MPI_Barrier(MPI_COMM_WORLD);
      save(dir, tp, 2, argc > 4 ? std::atoll(argv[4]) : 256);
      return 0;
    }
    if (mode == "load") {
      const torch::ScalarType dt = argc > 5 && std::string(argv[5]) == "float32" ? torch::kFloat32 : torch::kBFloat16;
      return load(dir, tp, argc > 4 ? std::atoll(argv[4]) : 1, dt);
    }
    throw UsageError("ckpt_probe: unknown mode " + mode);
  });
  MPI_Finalize();
  return rc;
}
