// Single-process helpers for the optimizer unit tests: a size-1 communicator (every collective is the identity), the
// process groups of a one-rank world built from it, and a tiny synthetic model whose ParamList mixes weights (weight
// decay) and biases/LayerNorm (no weight decay).
#pragma once
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "dist/process_groups.h"
#include "parallel/param_info.h"

namespace megaton::optimtest {

class SelfCommunicator : public dist::Communicator {
 public:
  explicit SelfCommunicator(std::string name) : name_(std::move(name)) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::string& name() const override { return name_; }
  const std::vector<int>& members() const override { return members_; }
  void all_reduce(torch::Tensor&, dist::ReduceOp) override {}
  void all_gather(torch::Tensor& out, const torch::Tensor& in) override { out.copy_(in); }
  void reduce_scatter(torch::Tensor& out, const torch::Tensor& in, dist::ReduceOp) override { out.copy_(in); }
  void broadcast(torch::Tensor&, int) override {}
  void send(const torch::Tensor&, int) override { throw std::logic_error("send on a one-rank group"); }
  void recv(torch::Tensor&, int) override { throw std::logic_error("recv on a one-rank group"); }
  void send_recv(const torch::Tensor&, int, torch::Tensor&, int) { throw std::logic_error("send_recv on one rank"); }
  void barrier() override {}

 private:
  std::string name_;
  std::vector<int> members_{0};
};

inline dist::ProcessGroups self_groups() {
  dist::ProcessGroups g{dist::RankGrid(1, 1, 1)};
  g.world = std::make_shared<SelfCommunicator>("world");
  g.tp = std::make_shared<SelfCommunicator>("tp");
  g.dp = std::make_shared<SelfCommunicator>("dp");
  g.pp = std::make_shared<SelfCommunicator>("pp");
  g.mp = std::make_shared<SelfCommunicator>("mp");
  g.embedding = std::make_shared<SelfCommunicator>("embedding");
  return g;
}

/// y = ln_w * x; h = tanh(W1 y + b1); out = W2 h + b2   (x [b, 4], out [b, 3])
struct TinyModel {
  parallel::ParamList params;

  explicit TinyModel(torch::ScalarType dtype = torch::kFloat32, uint64_t seed = 7) {
    torch::manual_seed(seed);
    add("ln.weight", torch::ones({4}) + 0.1 * torch::randn({4}), true, dtype);
    add("fc1.weight", torch::randn({8, 4}) * 0.5, false, dtype);
    add("fc1.bias", torch::randn({8}) * 0.1, true, dtype);
    add("fc2.weight", torch::randn({3, 8}) * 0.5, false, dtype);
    add("fc2.bias", torch::randn({3}) * 0.1, true, dtype);
  }
  void add(const std::string& name, torch::Tensor init, bool no_wd, torch::ScalarType dtype) {
    parallel::ParamInfo p;
    p.name = name;
    p.param = init.to(dtype).set_requires_grad(true);
    p.global_shape = init.sizes().vec();
    p.no_weight_decay = no_wd;
    params.push_back(p);
  }
  const torch::Tensor& operator[](size_t i) const { return params[i].param; }
  /// Mean squared error against `target` [b, 3] for input x [b, 4], computed in fp32.
  torch::Tensor loss(const torch::Tensor& x, const torch::Tensor& target) const {
    auto f = [](const torch::Tensor& t) { return t.to(torch::kFloat32); };
    auto y = x * f(params[0].param);
    auto h = torch::tanh(torch::matmul(y, f(params[1].param).t()) + f(params[2].param));
    auto out = torch::matmul(h, f(params[3].param).t()) + f(params[4].param);
    return (out - target).pow(2).mean();
  }
  std::vector<torch::Tensor> snapshot() const {
    std::vector<torch::Tensor> s;
    for (const auto& p : params) s.push_back(p.param.detach().clone());
    return s;
  }
};

}  // namespace megaton::optimtest
