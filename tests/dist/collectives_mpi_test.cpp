// Every collective of the MPI communicator against a reference computed locally, on every group of several grids.
#include <torch/torch.h>

#include "support/mpi_fixture.h"

using namespace megaton;
using megaton::dist::ReduceOp;

namespace {

// The tensor rank r contributes: distinct per rank and element, exact in every dtype tested.
torch::Tensor contribution(int group_rank, int64_t n, torch::ScalarType dtype) {
  return (torch::arange(n, torch::kFloat64).remainder(13) + 3 * group_rank + 1).to(dtype);
}

void check_all_collectives(dist::Communicator& c, torch::ScalarType dtype) {
  const int n = c.size(), r = c.rank();
  const int64_t len = 6 * n;
  // all_reduce sum / max / min / avg
  torch::Tensor ref_sum = torch::zeros({len}, torch::kFloat64), ref_max, ref_min;
  for (int q = 0; q < n; ++q) {
    auto x = contribution(q, len, dtype).to(torch::kFloat64);
    ref_sum += x;
    ref_max = q == 0 ? x : torch::maximum(ref_max, x);
    ref_min = q == 0 ? x : torch::minimum(ref_min, x);
  }
  for (auto [op, ref] : std::vector<std::pair<ReduceOp, torch::Tensor>>{
           {ReduceOp::kSum, ref_sum}, {ReduceOp::kMax, ref_max}, {ReduceOp::kMin, ref_min}}) {
    auto t = contribution(r, len, dtype);
    c.all_reduce(t, op);
    EXPECT_TRUE(torch::equal(t.to(torch::kFloat64), ref)) << c.describe() << " all_reduce " << dist::reduce_op_name(op);
  }
  if (dtype == torch::kFloat32 || dtype == torch::kFloat64) {
    auto t = contribution(r, len, dtype);
    c.all_reduce(t, ReduceOp::kAvg);
    EXPECT_TRUE(torch::allclose(t.to(torch::kFloat64), ref_sum / n)) << c.describe() << " all_reduce avg";
  }
  // all_gather
  {
    auto in = contribution(r, len / n, dtype);
    auto out = torch::empty({len}, in.options());
    c.all_gather(out, in);
    std::vector<torch::Tensor> parts;
    for (int q = 0; q < n; ++q) parts.push_back(contribution(q, len / n, dtype));
    EXPECT_TRUE(torch::equal(out, torch::cat(parts))) << c.describe() << " all_gather";
  }
  // reduce_scatter
  {
    auto in = contribution(r, len, dtype);
    auto out = torch::empty({len / n}, in.options());
    c.reduce_scatter(out, in, ReduceOp::kSum);
    EXPECT_TRUE(torch::equal(out.to(torch::kFloat64), ref_sum.slice(0, r * (len / n), (r + 1) * (len / n))))
        << c.describe() << " reduce_scatter";
  }
  // broadcast from every root
  for (int root = 0; root < n; ++root) {
    auto t = r == root ? contribution(root, len, dtype) : torch::full({len}, -1.0, torch::TensorOptions().dtype(dtype));
    c.broadcast(t, root);
    EXPECT_TRUE(torch::equal(t, contribution(root, len, dtype))) << c.describe() << " broadcast root " << root;
  }
  // send/recv around the ring
  if (n > 1) {
    auto out = contribution(r, len, dtype);
    auto in = torch::empty({len}, out.options());
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    if (r % 2 == 0) {
      c.send(out, next);
      c.recv(in, prev);
    } else {
      c.recv(in, prev);
      c.send(out, next);
    }
    EXPECT_TRUE(torch::equal(in, contribution(prev, len, dtype))) << c.describe() << " send/recv";
    // send_recv: every rank sends and receives at once (no ordering), both directions of the ring.
    auto back = torch::empty({len}, out.options());
    c.send_recv(out, prev, back, next);
    EXPECT_TRUE(torch::equal(back, contribution(next, len, dtype))) << c.describe() << " send_recv";
    // one-sided use: only rank 0 sends, only rank 1 receives.
    torch::Tensor none, got = torch::zeros({len}, out.options());
    if (r == 0) c.send_recv(out, 1, none, 0);
    if (r == 1) c.send_recv(none, 0, got, 0);
    if (r == 1) EXPECT_TRUE(torch::equal(got, contribution(0, len, dtype))) << c.describe() << " send_recv one-sided";
  }
  c.barrier();
}

}  // namespace

TEST(Collectives, EveryGroupOfEveryGrid) {
  const int w = mpitest::world_size();
  for (int tp : {1, 2, 4}) {
    for (int pp : {1, 2}) {
      if (w % (tp * pp) != 0) continue;
      auto g = mpitest::cpu_groups(tp, pp);
      for (auto dtype : {torch::kFloat32, torch::kFloat64, torch::kBFloat16, torch::kInt64}) {
        for (auto* c : {g.world.get(), g.tp.get(), g.dp.get(), g.pp.get(), g.mp.get(), g.embedding.get()})
          check_all_collectives(*c, dtype);
      }
    }
  }
}

TEST(Collectives, GroupsMatchTheGrid) {
  const int w = mpitest::world_size();
  if (w % 2 != 0) GTEST_SKIP();
  auto g = mpitest::cpu_groups(2, w >= 4 ? 2 : 1);
  EXPECT_EQ(g.tp->size(), 2);
  EXPECT_EQ(g.tp->rank(), g.coords.tp);
  EXPECT_EQ(g.dp->rank(), g.coords.dp);
  EXPECT_EQ(g.pp->rank(), g.coords.pp);
  // The world rank all-gathered over the tp group equals the grid's member list.
  auto me = torch::tensor({static_cast<int64_t>(g.rank)});
  auto all = torch::empty({g.tp->size()}, torch::kInt64);
  g.tp->all_gather(all, me);
  const auto expect = g.grid.tp_group(g.rank);
  for (int i = 0; i < g.tp->size(); ++i) EXPECT_EQ(all[i].item<int64_t>(), expect[i]);
}

// Started collectives: several in flight on one group at once, waited for in reverse order (MPI completes them in any
// order), equal the blocking calls; the average of a half tensor goes through its fp32 stand-in; a Work dropped
// without wait() still completes, and wait() twice is harmless.
TEST(Collectives, StartedOperationsEqualBlockingOnes) {
  auto g = mpitest::cpu_groups(1, 1);
  dist::Communicator& c = *g.world;
  const int n = c.size(), r = c.rank();
  const int64_t len = 8 * n;
  for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    torch::Tensor ar = contribution(r, len, dtype), ar_ref = ar.clone();
    torch::Tensor rs_in = contribution(r + 1, len, dtype), rs_out = torch::empty({len / n}, rs_in.options());
    torch::Tensor rs_ref = torch::empty_like(rs_out);
    torch::Tensor ag_in = contribution(r + 2, 3, dtype), ag_out = torch::empty({3 * n}, ag_in.options());
    torch::Tensor ag_ref = torch::empty_like(ag_out);
    std::vector<dist::WorkPtr> works;
    works.push_back(c.start_all_reduce(ar, ReduceOp::kAvg));
    works.push_back(c.start_reduce_scatter(rs_out, rs_in, ReduceOp::kSum));
    works.push_back(c.start_all_gather(ag_out, ag_in));
    for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait();
    works.front()->wait();
    c.all_reduce(ar_ref, ReduceOp::kAvg);
    c.reduce_scatter(rs_ref, rs_in, ReduceOp::kSum);
    c.all_gather(ag_ref, ag_in);
    EXPECT_TRUE(torch::equal(ar, ar_ref)) << c10::toString(dtype) << " all_reduce avg";
    EXPECT_TRUE(torch::equal(rs_out, rs_ref)) << c10::toString(dtype) << " reduce_scatter";
    EXPECT_TRUE(torch::equal(ag_out, ag_ref)) << c10::toString(dtype) << " all_gather";
    if (n > 1) EXPECT_FALSE(torch::equal(ar, contribution(r, len, dtype))) << "the all-reduce changed nothing";
  }
  torch::Tensor dropped = contribution(r, len, torch::kFloat32);
  c.start_all_reduce(dropped, ReduceOp::kSum);  // destroyed at once: completes before returning
  torch::Tensor ref = contribution(r, len, torch::kFloat32);
  c.all_reduce(ref, ReduceOp::kSum);
  EXPECT_TRUE(torch::equal(dropped, ref));
}
