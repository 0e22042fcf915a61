// Column/row-parallel linear, vocab-parallel embedding and cross-entropy at TP = 1, 2, 4, 8 against a TP=1
// reference computed on every rank with a one-rank group: outputs, input gradients and weight-gradient shards.
#include <torch/torch.h>

#include <algorithm>

#include "dist/self_communicator.h"
#include "model/model_mpi_test_util.h"
#include "parallel/tensor/cross_entropy.h"
#include "parallel/tensor/layers.h"
#include "parallel/tensor/lm_head_loss.h"
#include "parallel/tensor/mappings.h"
#include "support/mpi_fixture.h"

using namespace megaton;

namespace {
constexpr double kTol = 1e-5;

std::vector<int> tp_sizes() {
  std::vector<int> out;
  for (int tp : {1, 2, 4, 8})
    if (mpitest::world_size() % tp == 0) out.push_back(tp);
  return out;
}

torch::Tensor input(std::vector<int64_t> shape, int salt) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return torch::sin(torch::arange(n, torch::kFloat32) * 0.37 + salt).view(shape);
}
}  // namespace

TEST(TensorParallelLayers, ColumnParallelLinearMatchesTp1) {
  auto self = std::make_shared<dist::SelfCommunicator>("tp");
  for (int tp : tp_sizes()) {
    auto g = mpitest::cpu_groups(tp, 1);
    bool ok = true;
    for (bool gather : {false, true}) {
      for (bool fused_qkv : {false, true}) {
        parallel::ColumnParallelOptions o;
        o.in = 8;
        o.out = 24;
        o.gather_output = gather;
        if (fused_qkv) o.canonical_shape = {8, 3, 1, 8};  // heads 8, head dim 1
        parallel::ParamFactory f(42, g.tp->rank(), tp, torch::kFloat32, torch::kCPU),
            fr(42, 0, 1, torch::kFloat32, torch::kCPU);
        parallel::ColumnParallelLinear layer(f, "l", o, g.tp), ref(fr, "l", o, self);
        auto x = input({3, 2, 8}, 1).requires_grad_(true), xr = input({3, 2, 8}, 1).requires_grad_(true);
        auto y = layer.forward(x), yr = ref.forward(xr);
        auto full = gather ? y : parallel::all_gather_last_dim(y.detach(), *g.tp);
        // Heads split along the canonical dim 0 are contiguous output rows, so the gathered output is TP=1's.
        ok &= modeltest::rel_err(full, yr) < kTol;
        auto w = input({3, 2, 24}, 2);
        (y * (gather ? w : parallel::split_last_dim(w, *g.tp))).sum().backward();
        (yr * w).sum().backward();
        ok &= modeltest::rel_err(x.grad(), xr.grad()) < kTol;
        std::string worst;
        int missing = 0;
        ok &= modeltest::worst_param_error(f.params(), fr.params(), *g.tp, true, &worst, &missing) < kTol;
        ok &= modeltest::worst_param_error(f.params(), fr.params(), *g.tp, false, &worst, &missing) == 0.0;
        ok &= missing == 0;
      }
    }
    EXPECT_TRUE(mpitest::all_ranks(ok)) << "TP=" << tp;
  }
}

TEST(TensorParallelLayers, RowParallelLinearMatchesTp1) {
  auto self = std::make_shared<dist::SelfCommunicator>("tp");
  for (int tp : tp_sizes()) {
    auto g = mpitest::cpu_groups(tp, 1);
    parallel::RowParallelOptions o;
    o.in = 16;
    o.out = 6;
    o.input_is_parallel = false;
    parallel::ParamFactory f(7, g.tp->rank(), tp, torch::kFloat32, torch::kCPU),
        fr(7, 0, 1, torch::kFloat32, torch::kCPU);
    parallel::RowParallelLinear layer(f, "r", o, g.tp), ref(fr, "r", o, self);
    {  // a non-zero bias, so that adding it once (after the reduction) is checked
      torch::NoGradGuard ng;
      layer.bias.fill_(0.5);
      ref.bias.fill_(0.5);
    }
    auto x = input({4, 16}, 3).requires_grad_(true), xr = input({4, 16}, 3).requires_grad_(true);
    auto y = layer.forward(x), yr = ref.forward(xr);
    bool ok = modeltest::rel_err(y, yr) < kTol;
    auto w = input({4, 6}, 4);
    (y * w).sum().backward();
    (yr * w).sum().backward();
    ok &= modeltest::rel_err(x.grad(), xr.grad()) < kTol;
    std::string worst;
    int missing = 0;
    ok &= modeltest::worst_param_error(f.params(), fr.params(), *g.tp, true, &worst, &missing) < kTol;
    EXPECT_TRUE(mpitest::all_ranks(ok && missing == 0)) << "TP=" << tp << " worst " << worst;
  }
}

TEST(TensorParallelLayers, VocabParallelEmbeddingMatchesTp1) {
  auto self = std::make_shared<dist::SelfCommunicator>("tp");
  for (int tp : tp_sizes()) {
    auto g = mpitest::cpu_groups(tp, 1);
    parallel::ParamFactory f(9, g.tp->rank(), tp, torch::kFloat32, torch::kCPU),
        fr(9, 0, 1, torch::kFloat32, torch::kCPU);
    const auto init = parallel::InitSpec::normal(1.0);
    parallel::VocabParallelEmbedding e(f, "emb", 21, 24, 5, init, g.tp, false),
        er(fr, "emb", 21, 24, 5, init, self, false);
    auto ids = (torch::arange(12, torch::kInt64) * 5).remainder(21).view({3, 4});
    auto y = e.forward(ids), yr = er.forward(ids);
    bool ok = torch::equal(y, yr);
    (y * input({3, 4, 5}, 5)).sum().backward();
    (yr * input({3, 4, 5}, 5)).sum().backward();
    std::string worst;
    int missing = 0;
    ok &= modeltest::worst_param_error(f.params(), fr.params(), *g.tp, true, &worst, &missing) < kTol;
    ok &= er.weight.narrow(0, 21, 3).abs().sum().item<double>() == 0.0;  // padding rows
    EXPECT_TRUE(mpitest::all_ranks(ok && missing == 0)) << "TP=" << tp;
  }
}

TEST(TensorParallelLayers, VocabParallelCrossEntropyMatchesLogSoftmax) {
  for (int tp : tp_sizes()) {
    auto g = mpitest::cpu_groups(tp, 1);
    const int64_t s = 5, b = 2, V = 16;
    auto full = (input({s, b, V}, 6) * 4.0).to(torch::kFloat64);  // [s, b, V]
    auto target = (torch::arange(s * b, torch::kInt64) * 7).remainder(V).view({s, b});
    auto local = parallel::split_last_dim(full, *g.tp).to(torch::kFloat32).requires_grad_(true);
    auto loss = parallel::vocab_parallel_cross_entropy(local, target, g.tp);  // [s, b]
    auto upstream = input({s, b}, 7);
    (loss * upstream).sum().backward();
    // Reference in double: -log_softmax at the target; gradient (softmax - one_hot) * upstream.
    auto logp = torch::log_softmax(full, -1);
    auto ref_loss = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1);
    auto ref_grad = (logp.exp() - torch::one_hot(target, V).to(torch::kFloat64)) * upstream.unsqueeze(-1);
    bool ok = modeltest::rel_err(loss, ref_loss) < kTol;
    ok &= modeltest::rel_err(local.grad(), parallel::split_last_dim(ref_grad, *g.tp)) < kTol;
    EXPECT_TRUE(mpitest::all_ranks(ok)) << "TP=" << tp;
  }
}

// The LM head and its loss in one op (lm_head_cross_entropy: the logits' gradient written in the forward pass, the
// per-token loss gradient applied in the backward GEMMs) over a vocabulary split across TP ranks, with padding columns
// on the last rank: losses and the gradients of the hidden states (summed over TP by copy_to_tp_region's backward) and
// of each rank's weight slice, against log_softmax of the full logits in double.
TEST(TensorParallelLayers, LmHeadCrossEntropyMatchesLogSoftmax) {
  for (int tp : tp_sizes()) {
    auto g = mpitest::cpu_groups(tp, 1);
    const int64_t s = 5, b = 2, h = 6, V = 16, vocab = 13;  // columns >= 13 are padding
    auto hidden_full = input({s, b, h}, 8).to(torch::kFloat64);
    auto weight_full = (input({V, h}, 9) * 2.0).to(torch::kFloat64);  // [V, h]
    auto target = (torch::arange(s * b, torch::kInt64) * 5).remainder(vocab).view({s, b});
    auto hidden = hidden_full.to(torch::kFloat32).requires_grad_(true);
    const int64_t part = V / tp;
    auto weight = weight_full.narrow(0, part * g.tp->rank(), part).to(torch::kFloat32).requires_grad_(true);
    const int64_t valid = std::clamp<int64_t>(vocab - part * g.tp->rank(), 0, part);
    auto loss = parallel::lm_head_cross_entropy(parallel::copy_to_tp_region(hidden, g.tp), weight, target, g.tp,
                                                valid);  // [s, b]
    auto upstream = input({s, b}, 7);
    (loss * upstream).sum().backward();
    torch::Tensor ref_h = hidden_full.clone().requires_grad_(true), ref_w = weight_full.clone().requires_grad_(true);
    auto logits = torch::matmul(ref_h, ref_w.narrow(0, 0, vocab).t());  // [s, b, vocab]: padding left out
    auto ref_loss = -torch::log_softmax(logits, -1).gather(-1, target.unsqueeze(-1)).squeeze(-1);
    (ref_loss * upstream.to(torch::kFloat64)).sum().backward();
    bool ok = modeltest::rel_err(loss, ref_loss) < kTol;
    ok &= modeltest::rel_err(hidden.grad(), ref_h.grad()) < kTol;
    ok &= modeltest::rel_err(weight.grad(), ref_w.grad().narrow(0, part * g.tp->rank(), part)) < kTol;
    EXPECT_TRUE(mpitest::all_ranks(ok)) << "TP=" << tp;
  }
}
