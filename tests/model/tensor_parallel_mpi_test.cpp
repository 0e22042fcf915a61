// A tiny GPT at TP = 2, 4, 8 (as the world allows) against the TP=1 model every rank also builds locally: the same
// initial parameters, and logits, loss and every gradient equal in fp32 — for each position / activation variant,
// untied output weights, and hidden dropout with activation recomputation.
#include <torch/torch.h>

#include "dist/self_communicator.h"
#include "model/gpt_stage.h"
#include "model/model_mpi_test_util.h"
#include "parallel/tensor/mappings.h"
#include "support/mpi_fixture.h"

using namespace megaton;

namespace {

struct Variant {
  const char* label;
  model::GptConfig config;
};

std::vector<Variant> variants() {
  std::vector<Variant> v;
  v.push_back({"absolute/gelu", modeltest::tiny_config("absolute")});
  v.push_back({"rotary/swiglu", modeltest::tiny_config("rotary", "swiglu")});
  auto alibi = modeltest::tiny_config("alibi", "geglu");
  alibi.model.embed_layernorm = true;
  v.push_back({"alibi/geglu/embed-ln", alibi});
  auto untied = modeltest::tiny_config("absolute", "liglu");
  untied.model.untie_embeddings_and_output_weights = true;
  v.push_back({"untied/liglu", untied});
  auto dropout = modeltest::tiny_config("rotary", "reglu");
  dropout.model.hidden_dropout = 0.2;  // outside TP regions: the same masks at every TP size
  dropout.model.checkpoint_activations = true;
  v.push_back({"hidden-dropout/recompute", dropout});
  return v;
}

struct Result {
  torch::Tensor logits;  // [s, b, V] real vocabulary
  torch::Tensor loss;
};

Result step(model::GptStage& m, const torch::Tensor& ids, const torch::Tensor& labels, dist::Communicator& tp) {
  m.zero_grad();
  auto logits = m.forward(ids);
  auto mask = (torch::arange(labels.numel()).view(labels.sizes()).remainder(5) != 3).to(torch::kFloat32);
  auto loss = model::GptStage::masked_mean(m.token_losses(logits, labels), mask);
  loss.backward();
  return {parallel::all_gather_last_dim(logits.detach(), tp).narrow(-1, 0, m.config().vocab_size), loss.detach()};
}

}  // namespace

TEST(ModelTensorParallel, EveryVariantMatchesTp1) {
  const auto local = dist::single_rank_groups();
  for (int tp : {2, 4, 8}) {
    if (mpitest::world_size() % tp != 0) continue;
    auto g = mpitest::cpu_groups(tp, 1);
    for (const auto& v : variants()) {
      model::GptStage m(v.config, g), ref(v.config, local);
      const auto ids = modeltest::tokens(2, 8, 100), labels = modeltest::tokens(2, 8, 100, 9);
      std::string worst;
      int missing = 0;
      const double init_err = modeltest::worst_param_error(m.params(), ref.params(), *g.tp, false, &worst, &missing);
      EXPECT_TRUE(mpitest::all_ranks(init_err == 0.0 && missing == 0))
          << v.label << " TP=" << tp << ": initial " << worst << " differs by " << init_err;
      const Result a = step(m, ids, labels, *g.tp), b = step(ref, ids, labels, *local.tp);
      const double logit_err = modeltest::rel_err(a.logits, b.logits), loss_err = modeltest::rel_err(a.loss, b.loss);
      const double grad_err = modeltest::worst_param_error(m.params(), ref.params(), *g.tp, true, &worst, &missing);
      EXPECT_TRUE(mpitest::all_ranks(logit_err < 1e-5))
          << v.label << " TP=" << tp << ": logits differ by " << logit_err;
      EXPECT_TRUE(mpitest::all_ranks(loss_err < 1e-6)) << v.label << " TP=" << tp << ": loss differs by " << loss_err;
      EXPECT_TRUE(mpitest::all_ranks(grad_err < 1e-5))
          << v.label << " TP=" << tp << ": gradient of " << worst << " differs by " << grad_err;
      EXPECT_TRUE(mpitest::all_ranks(missing == 0));
      // Each rank holds 1/tp of every split parameter.
      for (const auto& p : m.params()) {
        int64_t global = 1;
        for (auto d : p.global_shape) global *= d;
        EXPECT_EQ(p.param.numel() * (p.partition_dim >= 0 ? tp : 1), global) << p.name;
      }
    }
  }
}

TEST(ModelTensorParallel, DropoutStreamsDifferInsideTpRegionsOnly) {
  for (int tp : {2, 4}) {
    if (mpitest::world_size() % tp != 0) continue;
    auto g = mpitest::cpu_groups(tp, 1);
    auto c = modeltest::tiny_config();
    model::GptStage m(c, g);
    auto draw = [](at::Generator& gen) { return torch::empty({64}).uniform_(0, 1, gen); };
    auto tp_draws = parallel::all_gather_last_dim(draw(m.rng().tp_generator()), *g.tp).view({tp, 64});
    auto def_draws = parallel::all_gather_last_dim(draw(m.rng().default_generator()), *g.tp).view({tp, 64});
    bool ok = true;
    for (int q = 1; q < tp; ++q) {
      ok &= torch::equal(def_draws[q], def_draws[0]);
      ok &= !torch::equal(tp_draws[q], tp_draws[0]);
    }
    EXPECT_TRUE(mpitest::all_ranks(ok)) << "TP=" << tp;
  }
}
