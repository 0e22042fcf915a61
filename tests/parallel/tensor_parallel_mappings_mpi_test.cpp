// The four TP autograd mappings, forward and backward, against their definitions, on every TP size the world allows.
#include <torch/torch.h>

#include "parallel/tensor/mappings.h"
#include "support/mpi_fixture.h"

using namespace megaton;

namespace {
torch::Tensor value(int q, int64_t cols = 4) {  // what group rank q contributes: [3, cols]
  return (torch::arange(3 * cols, torch::kFloat32).view({3, cols}) + 100.0f * q);
}
}  // namespace

TEST(TensorParallelMappings, ForwardAndBackwardMatchDefinitions) {
  for (int tp : {1, 2, 4, 8}) {
    if (mpitest::world_size() % tp != 0) continue;
    auto g = mpitest::cpu_groups(tp, 1);
    const int r = g.tp->rank(), n = g.tp->size();
    torch::Tensor sum_q = torch::zeros({3, 4});
    std::vector<torch::Tensor> parts;
    for (int q = 0; q < n; ++q) sum_q += value(q), parts.push_back(value(q));
    torch::Tensor cat_q = torch::cat(parts, -1);  // [3, 4n]
    bool ok = true;
    // copy: identity forward; backward sums the upstream gradients of all ranks.
    {
      auto x = value(r).requires_grad_(true);
      auto y = parallel::copy_to_tp_region(x, g.tp);
      ok &= torch::equal(y, x);
      (y * value(r)).sum().backward();
      ok &= torch::equal(x.grad(), sum_q);
    }
    // reduce: sum forward; identity backward.
    {
      auto x = value(r).requires_grad_(true);
      auto y = parallel::reduce_from_tp_region(x, g.tp);
      ok &= torch::equal(y, sum_q);
      (y * value(7)).sum().backward();
      ok &= torch::equal(x.grad(), value(7));
    }
    // scatter: own slice of the last dim forward; backward gathers every rank's upstream gradient.
    {
      auto x = cat_q.clone().requires_grad_(true);
      auto y = parallel::scatter_to_tp_region(x, g.tp);
      ok &= torch::equal(y, value(r));
      (y * value(r)).sum().backward();
      ok &= torch::equal(x.grad(), cat_q);
    }
    // gather: concatenation forward; backward keeps this rank's slice of the upstream gradient.
    {
      auto x = value(r).requires_grad_(true);
      auto y = parallel::gather_from_tp_region(x, g.tp);
      ok &= torch::equal(y, cat_q);
      auto upstream = torch::arange(12 * n, torch::kFloat32).view({3, 4 * n}) * 3.0f;
      (y * upstream).sum().backward();
      ok &= torch::equal(x.grad(), upstream.narrow(1, 4 * r, 4));
    }
    EXPECT_TRUE(mpitest::all_ranks(ok)) << "TP=" << tp;
  }
}
