// megaton comm-bench: every collective of the Communicator checked against its expected result and timed over a
// range of sizes, reporting algorithm and bus bandwidth as nccl-tests defines them (doc/PERFORMANCE.md there):
// algbw = bytes / t; busbw = algbw * 2(n-1)/n for all-reduce, (n-1)/n for all-gather and reduce-scatter, 1 for
// broadcast. Exits non-zero if any check fails on any rank.
//
// --overlap adds what training's overlapped gradient reduction gets on this machine: for all-reduce and reduce-scatter
// at each size, the collective started (Communicator::start_*) beside a compute load of about twice its time
// (matrix products on the device), then waited for; exposed = (both) - (compute alone), hidden = 1 - exposed / (the
// collective alone). NCCL runs the collective on its own stream beside the compute; MPI progresses it only inside
// MPI calls, so there the collective is mostly exposed.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>

#include "cli/parser.h"
#include "core/error.h"
#include "core/torch_compat.h"
#include "dist/launch_env.h"
#include "dist/mpi_session.h"
#include "dist/process_groups.h"
#include "tools/subcommands.h"
#if defined(MEGATON_HAVE_CUDA)
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace megaton::tools {

namespace po = boost::program_options;

namespace {

struct BenchOptions {
  int64_t min_bytes = 1024;
  int64_t max_bytes = 64 << 20;
  int iters = 20;
  int warmup = 5;
  std::string backend = "auto";
  std::string device = "auto";
  std::string dtype = "float32";
  double timeout_min = 5.0;
  bool overlap = false;
};

void sync_device(const torch::Device& dev) {
#if defined(MEGATON_HAVE_CUDA)
  if (dev.is_cuda()) torch::cuda::synchronize(dev.index());
#endif
}

/// Microseconds per run of `body` over `iters` runs, started together (a barrier) and ended when the device is done:
/// the slowest rank's.
double time_per_iteration(dist::Communicator& comm, const torch::Device& dev, int iters,
                          const std::function<void()>& body) {
  sync_device(dev);
  comm.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) body();
  sync_device(dev);
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
  MPI_Allreduce(MPI_IN_PLACE, &us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return us;
}

// The --overlap table: a started collective beside `products` matrix products of `a`, timed against each alone.
struct OverlapTimes {
  double comm_us = 0, compute_us = 0, both_us = 0;
};

OverlapTimes time_overlap(dist::Communicator& comm, const std::string& op, torch::Tensor& in, torch::Tensor& out,
                          const torch::Tensor& a, int iters, const torch::Device& dev) {
  auto start = [&]() {
    return op == "all_reduce" ? comm.start_all_reduce(in, dist::ReduceOp::kSum)
                              : comm.start_reduce_scatter(out, in, dist::ReduceOp::kSum);
  };
  auto timed = [&](const std::function<void()>& body) { return time_per_iteration(comm, dev, iters, body); };
  torch::Tensor c = a;
  auto compute = [&](int products) {
    for (int k = 0; k < products; ++k) c = torch::mm(a, c).div_(a.size(0));  // [m, m]; kept bounded
  };
  OverlapTimes t;
  t.comm_us = timed([&] { start()->wait(); });
  // Products for about twice the collective's time: one product timed alone first.
  const double one = timed([&] { compute(1); });
  const int products = std::max(1, static_cast<int>(2.0 * t.comm_us / std::max(one, 1e-3)));
  t.compute_us = timed([&] { compute(products); });
  t.both_us = timed([&] {
    dist::WorkPtr w = start();
    compute(products);
    w->wait();
  });
  return t;
}

}  // namespace

int run_comm_bench(int argc, const char* const* argv) {
  BenchOptions o;
  po::options_description d;
  d.add_options()("minbytes,b", po::value(&o.min_bytes)->default_value(o.min_bytes), "smallest message in bytes")(
      "maxbytes,e", po::value(&o.max_bytes)->default_value(o.max_bytes), "largest message in bytes")(
      "iters,n", po::value(&o.iters)->default_value(o.iters), "timed iterations per size")(
      "warmup,w", po::value(&o.warmup)->default_value(o.warmup), "untimed iterations per size")(
      "distributed-backend", po::value(&o.backend)->default_value(o.backend), "nccl | mpi | auto")(
      "device", po::value(&o.device)->default_value(o.device), "auto | cuda | cpu")(
      "dtype", po::value(&o.dtype)->default_value(o.dtype), "float32 | bfloat16")(
      "distributed-timeout-minutes", po::value(&o.timeout_min)->default_value(o.timeout_min), "collective timeout")(
      "overlap", po::bool_switch(&o.overlap),
      "also time all-reduce and reduce-scatter started beside a compute load: how much of them stays exposed");
  if (!cli::parse_args("comm-bench", "Check and time all-reduce, all-gather, reduce-scatter and broadcast.", argc, argv,
                       d, std::cout))
    return 0;
  MEGATON_CHECK(o.min_bytes > 0 && o.max_bytes >= o.min_bytes, UsageError,
                "--minbytes/--maxbytes: need 0 < minbytes <= maxbytes");
  MEGATON_CHECK(o.dtype == "float32" || o.dtype == "bfloat16", UsageError, "--dtype: expected float32|bfloat16");
  const auto dtype = o.dtype == "float32" ? torch::kFloat32 : torch::kBFloat16;

  const dist::LaunchEnv env = dist::detect_launch_env();
  dist::MpiSession session(env);
  const std::string dev_name = dist::select_device(o.device, env.local_rank);
  const torch::Device dev(dev_name);
#if defined(MEGATON_HAVE_CUDA)
  if (dev.is_cuda()) c10::cuda::set_device(dev.index());
#endif
  const auto backend = dist::parse_backend(o.backend, dev.is_cuda());
  dist::RankGrid grid(session.size(), 1, 1);
  auto groups = dist::build_process_groups(grid, backend, o.timeout_min * 60.0);
  auto& comm = *groups.world;
  const int n = comm.size(), r = comm.rank();
  if (r == 0)
    std::printf("# megaton comm-bench: %d ranks, backend %s, device %s, dtype %s\n", n,
                backend == dist::Backend::kNccl ? "nccl" : "mpi", dev_name.c_str(), o.dtype.c_str());
  if (r == 0) std::printf("# %12s %12s %10s %10s %10s %7s\n", "op", "bytes", "time(us)", "algbw", "busbw", "#wrong");
  const auto opts = torch::TensorOptions().dtype(dtype).device(dev);
  const int64_t esize = compat::element_size(dtype);
  int64_t wrong_total = 0;
  const char* ops[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast"};
  for (const char* op : ops) {
    for (int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 4) {
      const int64_t count = std::max<int64_t>(n, bytes / esize / n * n);  // divisible by n for the sharded ops
      // Values are small integers so every dtype sums them exactly: rank r contributes (r + 1) * (i % 7 + 1).
      const torch::Tensor base = (torch::arange(count, torch::kInt64) % 7 + 1).to(torch::kFloat32);
      const std::string name = op;
      const int64_t shard = count / n;
      // Inputs are made on the device once; the timed loop only runs the collective (as nccl-tests does).
      torch::Tensor in, out, expect;
      auto fresh_inputs = [&]() {
        if (name == "all_reduce") {
          in = (base * (r + 1)).to(opts);
          out = in;
        } else if (name == "all_gather") {
          in = (base.slice(0, 0, shard) * (r + 1)).to(opts);
          out = torch::empty({count}, opts);
        } else if (name == "reduce_scatter") {
          in = (base * (r + 1)).to(opts);
          out = torch::empty({shard}, opts);
        } else {
          out = r == 0 ? base.to(opts) : torch::zeros({count}, opts);
        }
      };
      auto run_once = [&]() {
        if (name == "all_reduce")
          comm.all_reduce(in, dist::ReduceOp::kSum);
        else if (name == "all_gather")
          comm.all_gather(out, in);
        else if (name == "reduce_scatter")
          comm.reduce_scatter(out, in, dist::ReduceOp::kSum);
        else
          comm.broadcast(out, 0);
      };
      const double tri = n * (n + 1) / 2.0;
      if (name == "all_reduce")
        expect = base * tri;
      else if (name == "all_gather") {
        std::vector<torch::Tensor> parts;
        for (int q = 0; q < n; ++q) parts.push_back(base.slice(0, 0, shard) * (q + 1));
        expect = torch::cat(parts);
      } else if (name == "reduce_scatter")
        expect = base.slice(0, r * shard, (r + 1) * shard) * tri;
      else
        expect = base;
      // Check: one run on fresh inputs. Then warm up and time on the same buffers (all-reduce values keep growing,
      // which changes nothing in its cost).
      fresh_inputs();
      run_once();
      sync_device(dev);
      const int64_t wrong = (out.to(torch::kCPU).to(torch::kFloat32) != expect).sum().item<int64_t>();
      for (int i = 0; i < o.warmup; ++i) run_once();
      const double t_max = time_per_iteration(comm, dev, o.iters, run_once);
      int64_t wrong_sum = wrong;
      MPI_Allreduce(MPI_IN_PLACE, &wrong_sum, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
      wrong_total += wrong_sum;
      const double size_bytes = double(count) * esize;  // nccl-tests: size of the full buffer
      const double algbw = size_bytes / t_max / 1e3;    // GB/s
      const double factor = name == "all_reduce" ? 2.0 * (n - 1) / n : name == "broadcast" ? 1.0 : double(n - 1) / n;
      if (r == 0)
        std::printf("  %12s %12lld %10.1f %10.2f %10.2f %7lld\n", op, static_cast<long long>(size_bytes), t_max, algbw,
                    algbw * factor, static_cast<long long>(wrong_sum));
    }
  }
  if (o.overlap) {
    if (r == 0)
      std::printf("# overlap: %14s %12s %10s %12s %10s %12s %8s\n", "op", "bytes", "comm(us)", "compute(us)",
                  "both(us)", "exposed(us)", "hidden");
    const torch::Tensor a = torch::full({256, 256}, 1.0, opts);  // [m, m]: compute load on the device
    for (const char* op : {"all_reduce", "reduce_scatter"}) {
      for (int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 4) {
        const int64_t count = std::max<int64_t>(n, bytes / esize / n * n);
        torch::Tensor in = torch::ones({count}, opts), out = torch::empty({count / n}, opts);
        const OverlapTimes t = time_overlap(comm, op, in, out, a, o.iters, dev);
        const double exposed = std::max(0.0, t.both_us - t.compute_us);
        const double hidden = t.comm_us > 0 ? std::clamp(1.0 - exposed / t.comm_us, 0.0, 1.0) : 0.0;
        if (r == 0)
          std::printf("  %23s %12lld %10.1f %12.1f %10.1f %12.1f %7.0f%%\n", op,
                      static_cast<long long>(double(count) * esize), t.comm_us, t.compute_us, t.both_us, exposed,
                      100.0 * hidden);
      }
    }
  }
  if (r == 0)
    std::printf("# %s: %lld wrong elements\n", wrong_total ? "FAILED" : "OK", static_cast<long long>(wrong_total));
  std::fflush(stdout);
  MEGATON_CHECK(wrong_total == 0, CommError, "comm-bench found ", wrong_total, " wrong elements");
  return 0;
}

}  // namespace megaton::tools
