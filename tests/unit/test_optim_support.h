// Single-process helpers for the optimizer unit tests: a size-1 communicator (every collective is the identity), the
// process groups of a one-rank world built from it, and a tiny synthetic model whose ParamList mixes weights (weight
// decay) and biases/LayerNorm (no weight decay).
#pragma once
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "../common/tiny_param_model.h"
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

using testutil::TinyModel;  // tests/common/tiny_param_model.h

}  // namespace megaton::optimtest
