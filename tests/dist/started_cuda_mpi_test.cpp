// The started collectives on CUDA tensors (skipped without a GPU): the NCCL communicator's own stream, at a group of
// one rank (one GPU), and the staged MPI path at any rank count (several ranks share the GPU). Work queued before a
// start must be seen by the operation, and work queued after wait() must see its result; the compute stream is kept
// busy (a sleep kernel) so that a missing stream dependency reads stale data instead of passing by luck.
#include <torch/torch.h>

#include "dist/staged_communicator.h"
#include "parallel/data/data_parallel.h"
#include "support/mpi_fixture.h"
#if defined(MEGATON_HAVE_NCCL)
#include <ATen/cuda/Sleep.h>

#include "dist/nccl_communicator.h"
#endif

using namespace megaton;
using megaton::dist::ReduceOp;

namespace {

#if defined(MEGATON_HAVE_NCCL)
constexpr int64_t kBusyCycles = 200'000'000;  // ~0.1 s of a sleep kernel on the compute stream

// in <- 7 behind a busy compute stream; start a copy of it into out (an all-gather of one rank, or of several: every
// rank's block is 7); queue out += 1 after wait(): 8 everywhere unless an ordering is missing.
void check_stream_order(dist::Communicator& c) {
  const auto cuda = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat32);
  torch::Tensor in = torch::zeros({1 << 20}, cuda);
  torch::Tensor out = torch::zeros({c.size() << 20}, cuda);
  at::cuda::sleep(kBusyCycles);
  in.fill_(7);
  dist::WorkPtr w = c.start_all_gather(out, in);
  w->wait();
  out.add_(1);
  EXPECT_TRUE(torch::all(out == 8).item<bool>()) << c.describe() << ": started all_gather out of order";
}

// NCCL: a blocking op of the group issued while a started one is in flight (no wait() between) runs after it on the
// device: a blocking all-gather of the started all-gather's output copies its result, not the zeros before it.
void check_blocking_after_started(dist::Communicator& c) {
  const auto cuda = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat32);
  torch::Tensor in = torch::zeros({1 << 20}, cuda), mid = torch::zeros({1 << 20}, cuda);
  torch::Tensor out = torch::zeros({1 << 20}, cuda);
  in.fill_(5);
  dist::WorkPtr w = c.start_all_gather(mid, in);
  c.all_gather(out, mid);
  w->wait();
  EXPECT_TRUE(torch::all(out == 5).item<bool>()) << c.describe() << ": the blocking op overtook the started one";
}
bool have_gpu() {
  return torch::cuda::is_available();
}
#endif

}  // namespace

TEST(StartedCuda, NcclStreamOrderAtOneRank) {
#if defined(MEGATON_HAVE_NCCL)
  if (!have_gpu() || mpitest::world_size() != 1) GTEST_SKIP() << "needs a GPU and one rank";
  MPI_Comm self;
  MPI_Comm_dup(MPI_COMM_SELF, &self);
  auto mpi = std::make_shared<dist::MpiCommunicator>(self, "self", std::vector<int>{0}, 60.0);
  dist::NcclCommunicator nccl(mpi, 60.0);
  check_stream_order(nccl);
  check_blocking_after_started(nccl);
#else
  GTEST_SKIP() << "built without NCCL";
#endif
}

TEST(StartedCuda, StagedMpiStreamOrder) {
#if defined(MEGATON_HAVE_NCCL)
  if (!mpitest::all_ranks(have_gpu())) GTEST_SKIP() << "needs a GPU";
  auto g = mpitest::cpu_groups(1, 1);  // MPI groups: CUDA tensors are staged through host memory
  check_stream_order(*g.world);
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

// ZeRO-1's overlapped parameter all-gather on CUDA parameters (the staged MPI path, several ranks on the GPU): started
// behind a busy compute stream and waited for bucket by bucket, the parameters equal the blocking all-gather's.
TEST(StartedCuda, Zero1ParamGatherEqualsBlockingOne) {
#if defined(MEGATON_HAVE_NCCL)
  if (!mpitest::all_ranks(have_gpu()) || mpitest::world_size() < 2) GTEST_SKIP() << "needs a GPU and DP > 1";
  auto g = mpitest::cpu_groups(1, 1);  // DP = world, CUDA tensors staged through host memory
  const auto cuda = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  parallel::ParamList params(3);
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].name = "p" + std::to_string(i);
    params[i].param = torch::zeros({1 << 18}, cuda).requires_grad_();
  }
  parallel::DataParallelOptions o;
  o.bucket_size_mb = 1.0;  // one parameter per bucket
  o.zero1 = true;
  o.overlap_param_gather = true;
  parallel::DataParallel dp(params, g, o);
  ASSERT_EQ(dp.layout().buckets().size(), 3u);
  const torch::Tensor shard =
      torch::arange(dp.shard_numel(), cuda.dtype(torch::kFloat32)).remainder(251) + 300.0f * (dp.dp_rank() + 1);
  dp.all_gather_params(shard);
  const torch::Tensor want = dp.param_buffer().clone();
  dp.param_buffer().zero_();
  at::cuda::sleep(kBusyCycles);
  dp.start_param_gather(shard);
  for (size_t i = 0; i < params.size(); ++i) dp.wait_param_gather(i, i + 1);
  EXPECT_TRUE(dp.param_buffer().equal(want)) << "the started parameter all-gather differs from the blocking one";
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}
