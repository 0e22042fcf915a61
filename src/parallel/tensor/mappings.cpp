#include "parallel/tensor/mappings.h"

#include <torch/csrc/autograd/custom_function.h>

#include "core/error.h"
#include "parallel/tensor/comm_capsule.h"

namespace megaton::parallel {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

torch::Tensor all_reduce_sum(const torch::Tensor& x, dist::Communicator& c) {
  torch::Tensor out = x.contiguous().clone();
  c.all_reduce(out, dist::ReduceOp::kSum);
  return out;
}

torch::Tensor all_gather_last_dim(const torch::Tensor& x, dist::Communicator& c) {
  const int n = c.size();
  torch::Tensor in = x.contiguous();
  // Gather whole shards rank after rank: [n * numel] viewed as [n, ...x.shape], then concatenated on the last dim.
  std::vector<int64_t> stacked{n};
  for (int64_t d : in.sizes()) stacked.push_back(d);
  torch::Tensor out = torch::empty(stacked, in.options());
  c.all_gather(out, in);
  return torch::cat(out.unbind(0), /*dim=*/-1);
}

torch::Tensor split_last_dim(const torch::Tensor& x, const dist::Communicator& c) {
  const int64_t last = x.size(-1);
  MEGATON_ASSERT(last % c.size() == 0, "last dimension ", last, " is not divisible by the size of ", c.describe());
  const int64_t part = last / c.size();
  return x.narrow(-1, c.rank() * part, part).contiguous();
}

namespace {

struct CopyToRegion : torch::autograd::Function<CopyToRegion> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, const dist::CommunicatorPtr& comm) {
    ctx->saved_data["comm"] = CommCapsule::wrap(comm);
    return x.view_as(x);  // identity; a view keeps autograd's output distinct from the input
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto comm = CommCapsule::unwrap(ctx->saved_data["comm"]);
    return {all_reduce_sum(grads[0], *comm), torch::Tensor()};
  }
};

struct ReduceFromRegion : torch::autograd::Function<ReduceFromRegion> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, const dist::CommunicatorPtr& comm) {
    return all_reduce_sum(x, *comm);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) { return {grads[0], torch::Tensor()}; }
};

struct ScatterToRegion : torch::autograd::Function<ScatterToRegion> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, const dist::CommunicatorPtr& comm) {
    ctx->saved_data["comm"] = CommCapsule::wrap(comm);
    return split_last_dim(x, *comm);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto comm = CommCapsule::unwrap(ctx->saved_data["comm"]);
    return {all_gather_last_dim(grads[0], *comm), torch::Tensor()};
  }
};

struct GatherFromRegion : torch::autograd::Function<GatherFromRegion> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, const dist::CommunicatorPtr& comm) {
    ctx->saved_data["comm"] = CommCapsule::wrap(comm);
    return all_gather_last_dim(x, *comm);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto comm = CommCapsule::unwrap(ctx->saved_data["comm"]);
    return {split_last_dim(grads[0], *comm), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor copy_to_tp_region(const torch::Tensor& x, const dist::CommunicatorPtr& tp) {
  if (tp->size() == 1) return x;
  return CopyToRegion::apply(x, tp);
}

torch::Tensor reduce_from_tp_region(const torch::Tensor& x, const dist::CommunicatorPtr& tp) {
  if (tp->size() == 1) return x;
  return ReduceFromRegion::apply(x, tp);
}

torch::Tensor scatter_to_tp_region(const torch::Tensor& x, const dist::CommunicatorPtr& tp) {
  if (tp->size() == 1) return x;
  return ScatterToRegion::apply(x, tp);
}

torch::Tensor gather_from_tp_region(const torch::Tensor& x, const dist::CommunicatorPtr& tp) {
  if (tp->size() == 1) return x;
  return GatherFromRegion::apply(x, tp);
}

}  // namespace megaton::parallel
