// Checkpoint save/load throughput (GB/s of tensor bytes) at the rank count mpirun gives, beside torch::save /
// torch::load of the same global tensors by one process. Run through perf/checkpoint/run.sh, or:
//   mpirun -np 4 build/perf/bench_checkpoint --hidden=1024 --layers=8 --tp=2 --dir=/tmp/megaton_bench [--cold]
//     [--readahead=BYTES]
// (--cold: each load reads from the disk, the checkpoint's pages dropped from the page cache before it;
// --readahead: how far the loader's disk reads may run ahead of it, LoadOptions::readahead_bytes, 0 for none.)
// Each benchmark iteration is timed as the slowest rank's wall time (MPI_MAX), bracketed by barriers, and includes
// everything a real save does (catalog exchange, collective HDF5 writes, checksums, fsync, rename, trackers).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>

#include "checkpoint/checkpoint.h"
#include "core/remove_tree.h"
#include "dist/process_groups.h"

using namespace megaton;
namespace fs = std::filesystem;

namespace {

struct Config {
  int64_t hidden = 1024;
  int64_t layers = 8;
  int64_t vocab = 50257;
  int tp = 1;
  int pp = 1;
  std::string dir = "/tmp/megaton_bench_ckpt";
  bool collective = true;
  bool cold = false;  // each load reads from the disk: the checkpoint's pages are dropped from the page cache first
  int64_t readahead = checkpoint::LoadOptions{}.readahead_bytes;  // --readahead=BYTES (0: none)
};
Config cfg;

int world_rank() {
  int r;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

/// A GPT's parameters at hidden h: word embedding [V_pad, h] (split 0, tied), per layer qkv [heads,3,hd,h] (split 0),
/// dense [h,h] (split 1), fc1 [4h,h] (split 0), fc2 [h,4h] (split 1), two LayerNorms, biases.
struct Model {
  parallel::ParamList params;
  checkpoint::OptimState optim;
  double bytes = 0;  // tensor bytes of the whole (global) state
};

Model make_model(const dist::RankGrid& grid, const dist::Coords& coords) {
  Model m;
  const int64_t h = cfg.hidden, heads = h / 64, tp = grid.tp_size();
  const int64_t vpad = (cfg.vocab + 128 * tp - 1) / (128 * tp) * (128 * tp);
  struct G {
    std::string name;
    std::vector<int64_t> shape;
    int pd;
    int64_t unpadded;
    int stage;
  };
  std::vector<G> gs;
  const int per = cfg.layers / grid.pp_size();
  gs.push_back({"embedding.word_embeddings.weight", {vpad, h}, 0, cfg.vocab, 0});
  for (int l = 0; l < cfg.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    const int s = l / per;
    gs.push_back({p + "input_layernorm.weight", {h}, -1, 0, s});
    gs.push_back({p + "attention.qkv.weight", {heads, 3, 64, h}, 0, 0, s});
    gs.push_back({p + "attention.qkv.bias", {heads, 3, 64}, 0, 0, s});
    gs.push_back({p + "attention.dense.weight", {h, h}, 1, 0, s});
    gs.push_back({p + "post_attention_layernorm.weight", {h}, -1, 0, s});
    gs.push_back({p + "mlp.fc1.weight", {4 * h, h}, 0, 0, s});
    gs.push_back({p + "mlp.fc2.weight", {h, 4 * h}, 1, 0, s});
  }
  gs.push_back({"final_layernorm.weight", {h}, -1, 0, grid.pp_size() - 1});
  for (const auto& x : gs) {
    int64_t n = 1;
    for (auto s : x.shape) n *= s;
    if (x.unpadded) n = n / x.shape[0] * x.unpadded;
    m.bytes += n * (2.0 + 3 * 4.0);  // bf16 weights + fp32 master, exp_avg, exp_avg_sq
    if (x.stage != coords.pp) continue;
    parallel::ParamInfo p;
    p.name = x.name;
    p.global_shape = x.shape;
    p.partition_dim = x.pd;
    p.global_unpadded_rows = x.unpadded;
    auto local = x.shape;
    if (x.pd >= 0) local[x.pd] /= tp;
    p.param = torch::randn(local).to(torch::kBFloat16);
    for (const char* s : {"master", "exp_avg", "exp_avg_sq"}) m.optim[s][x.name] = torch::randn(local);
    m.params.push_back(p);
  }
  return m;
}

// Drops every file under `dir` from the page cache (written back first), so the next read comes from the disk.
void evict_page_cache(const std::string& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const int fd = ::open(e.path().c_str(), O_RDONLY);
    if (fd < 0) continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

double timed(const std::function<void()>& fn) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return s;
}

void BM_Save(benchmark::State& st) {
  int world;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  auto g = dist::build_process_groups(dist::RankGrid(world, cfg.tp, cfg.pp), dist::Backend::kMpi, 600);
  Model m = make_model(g.grid, g.coords);
  Logger log(world_rank(), world, LogLevel::kWarning);
  checkpoint::SaveOptions so;
  so.collective_io = cfg.collective;
  so.keep_last = 1;
  int64_t it = 1;
  for (auto _ : st) {
    st.SetIterationTime(timed([&] {
      checkpoint::save_checkpoint(cfg.dir + "/save", {it++, {}, {}, {}}, m.params, &m.optim, nullptr, g, so, log);
    }));
  }
  st.SetBytesProcessed(static_cast<int64_t>(m.bytes) * st.iterations());
  st.counters["ranks"] = world;
  st.counters["GB"] = m.bytes / 1e9;
}

void BM_Load(benchmark::State& st) {
  int world;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  auto g = dist::build_process_groups(dist::RankGrid(world, cfg.tp, cfg.pp), dist::Backend::kMpi, 600);
  Model m = make_model(g.grid, g.coords);
  Logger log(world_rank(), world, LogLevel::kWarning);
  checkpoint::save_checkpoint(cfg.dir + "/load", {1, {}, {}, {}}, m.params, &m.optim, nullptr, g, {}, log);
  checkpoint::LoadOptions lo;
  lo.collective_io = cfg.collective;
  lo.verify_checksums = st.range(0) != 0;
  lo.readahead_bytes = cfg.readahead;
  for (auto _ : st) {
    if (cfg.cold) {
      MPI_Barrier(MPI_COMM_WORLD);
      if (world_rank() == 0) evict_page_cache(cfg.dir + "/load");
    }
    st.SetIterationTime(
        timed([&] { checkpoint::load_checkpoint(cfg.dir + "/load", m.params, &m.optim, nullptr, g, lo, log); }));
  }
  st.SetBytesProcessed(static_cast<int64_t>(m.bytes) * st.iterations());
  st.counters["ranks"] = world;
  st.counters["verify"] = static_cast<double>(lo.verify_checksums);
}

// torch::save / torch::load of the same state, whole (TP=PP=1), by one rank while the others wait.
void BM_TorchSaveLoad(benchmark::State& st) {
  const bool save = st.range(0) == 0;
  std::vector<torch::Tensor> ts;
  double bytes = 0;
  if (world_rank() == 0) {
    Model m = make_model(dist::RankGrid(1, 1, 1), dist::Coords{});
    for (auto& p : m.params) ts.push_back(p.param);
    for (auto& [s, mp] : m.optim)
      for (auto& [n, t] : mp) ts.push_back(t);
    bytes = m.bytes;
  }
  const std::string f = cfg.dir + "/torch.pt";
  if (world_rank() == 0 && !save) torch::save(ts, f);
  for (auto _ : st)
    st.SetIterationTime(timed([&] {
      if (world_rank() != 0) return;
      if (save) {
        torch::save(ts, f);
      } else {
        std::vector<torch::Tensor> back;
        torch::load(back, f);
      }
    }));
  MPI_Bcast(&bytes, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  st.SetBytesProcessed(static_cast<int64_t>(bytes) * st.iterations());
}

/// Ranks other than 0 run every benchmark (they take part in the collectives) but print nothing.
class SilentReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&](const char* k) { return a.rfind(k, 0) == 0 ? a.substr(std::strlen(k)) : std::string(); };
    if (!val("--hidden=").empty())
      cfg.hidden = std::stoll(val("--hidden="));
    else if (!val("--layers=").empty())
      cfg.layers = std::stoll(val("--layers="));
    else if (!val("--tp=").empty())
      cfg.tp = std::stoi(val("--tp="));
    else if (!val("--pp=").empty())
      cfg.pp = std::stoi(val("--pp="));
    else if (!val("--dir=").empty())
      cfg.dir = val("--dir=");
    else if (a == "--independent")
      cfg.collective = false;
    else if (a == "--cold")
      cfg.cold = true;
    else if (!val("--readahead=").empty())
      cfg.readahead = std::stoll(val("--readahead="));
    else
      rest.push_back(argv[i]);
  }
  int n = static_cast<int>(rest.size());
  if (world_rank() == 0) fs::create_directories(cfg.dir);
  benchmark::RegisterBenchmark("checkpoint_save", BM_Save)
      ->UseManualTime()
      ->Iterations(3)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("checkpoint_load", BM_Load)
      ->Arg(1)
      ->Arg(0)
      ->UseManualTime()
      ->Iterations(3)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("torch_save", BM_TorchSaveLoad)
      ->Arg(0)
      ->UseManualTime()
      ->Iterations(3)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("torch_load", BM_TorchSaveLoad)
      ->Arg(1)
      ->UseManualTime()
      ->Iterations(3)
      ->Unit(benchmark::kMillisecond);
  benchmark::Initialize(&n, rest.data());
  if (world_rank() == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    SilentReporter silent;
    benchmark::RunSpecifiedBenchmarks(&silent);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) megaton::remove_tree(cfg.dir);  // not fs::remove_all: src/core/remove_tree.h
  MPI_Finalize();
  return 0;
}
