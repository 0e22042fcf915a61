// A tiny synthetic model over a ParamList, shared by the optimizer unit tests and the multi-rank optimizer /
// data-parallel tests: weights (weight decay) and biases/LayerNorm (no weight decay), the same initial values for the
// same seed on every rank.
//   y = ln_w * x; h = tanh(W1 y + b1); out = W2 h + b2   (x [b, 4], out [b, 3])
#pragma once
#include <torch/torch.h>

#include <string>
#include <vector>

#include "parallel/param_info.h"

namespace megaton::testutil {

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

}  // namespace megaton::testutil
