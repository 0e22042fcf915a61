// --mup as the fork's muP branch defines it: each multiplier equals a rescaling of weights in the standard model
// (input: the embeddings; output: the final LayerNorm; attention: the query rows of QKV), the init draws every weight
// N(0, std / sqrt(width multiplier)), and the weights whose two dimensions grow with the width get Adam learning
// rate / width multiplier with weight decay lr * wd (checked against LibTorch's AdamW with mup.MuAdam's groups).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "core/error.h"
#include "dist/self_communicator.h"
#include "model/gpt_stage.h"
#include "model/model_test_util.h"
#include "optim/optim_test_support.h"
#include "optim/optimizer.h"
#include "parallel/data/data_parallel.h"

using namespace megaton;
using modeltest::tiny_config;

namespace {

model::GptConfig mup_config(double in, double out, double attn) {
  model::GptConfig c = tiny_config();
  c.model.mup = true;
  c.model.mup_input_mult = in;
  c.model.mup_output_mult = out;
  c.model.mup_attn_mult = attn;
  return c;
}

// Copies every parameter of `from` into `to` (same names), passing each through `edit(name, tensor)`.
template <typename Edit>
void copy_params(const model::GptStage& from, model::GptStage& to, Edit edit) {
  torch::NoGradGuard no_grad;
  const auto src = modeltest::by_name(from.params());
  for (const auto& p : to.params()) p.param.copy_(edit(p.name, src.at(p.name).param.clone()));
}

torch::Tensor logits(model::GptStage& m) {
  m.set_training(false);
  torch::NoGradGuard no_grad;
  return m.forward(modeltest::tokens(2, 8, 100)).narrow(-1, 0, 100);
}

}  // namespace

TEST(Mup, EachMultiplierIsARescaledStandardModel) {
  auto groups = dist::single_rank_groups();
  const double in = 1.7, out = 5.0, attn = 3.0;
  model::GptStage mup(mup_config(in, out, attn), groups), plain(tiny_config(), groups);
  const int64_t h = 32, d = 4;
  copy_params(mup, plain, [&](const std::string& name, torch::Tensor t) {
    if (name.find("embeddings.weight") != std::string::npos && name.find("word") == std::string::npos)
      return t * in;  // position embeddings: (word + position) * in
    if (name.find("final_layernorm") != std::string::npos) return t * (out / h);
    if (name.find("attention.qkv") != std::string::npos) {  // canonical [heads, 3, d, (h)]: scale the queries
      auto v = t.view({8, 3, -1});
      v.select(1, 0).mul_(attn / std::sqrt(double(d)));
    }
    return t;
  });
  // The word embedding is tied to the output layer: its input scaling goes to the embedding output instead, so
  // compare with the word embedding scaled and the logits unscaled by the same factor.
  {
    torch::NoGradGuard no_grad;
    for (const auto& p : plain.params())
      if (p.name == "embedding.word_embeddings.weight") p.param.mul_(in);
    for (const auto& p : plain.params())
      if (p.name == "final_layernorm.weight" || p.name == "final_layernorm.bias") p.param.div_(in);
  }
  EXPECT_LT(modeltest::rel_err(logits(mup), logits(plain)), 1e-5);

  // And the multipliers do change the model.
  model::GptStage neutral(mup_config(1.0, double(h), std::sqrt(double(d))), groups);
  copy_params(mup, neutral, [](const std::string&, torch::Tensor t) { return t; });
  EXPECT_GT(modeltest::rel_err(logits(mup), logits(neutral)), 1e-3);
}

TEST(Mup, NeutralMultipliersGiveTheStandardForward) {
  auto groups = dist::single_rank_groups();
  model::GptStage neutral(mup_config(1.0, 32.0, 2.0), groups), plain(tiny_config(), groups);  // head dim 4
  copy_params(neutral, plain, [](const std::string&, torch::Tensor t) { return t; });
  EXPECT_LT(modeltest::rel_err(logits(neutral), logits(plain)), 1e-6);
}

TEST(Mup, InitAndLearningRatesFollowTheWidthMultipliers) {
  auto groups = dist::single_rank_groups();
  model::GptConfig c = tiny_config();
  c.model.hidden_size = 256;
  c.model.num_attention_heads = 4;
  c.model.kv_channels = 0;
  c.model.ffn_hidden_size = 0;
  c.model.mup = true;
  c.model.mup_base_hidden_size = 32;       // base hidden 64: width 4
  c.model.mup_base_ffn_hidden_size = 256;  // base ffn 512 of 1024: width 2
  c.model.validate();
  model::GptStage m(c, groups);
  const double std0 = c.model.init_method_std;
  for (const auto& p : m.params()) {
    const std::string& n = p.name;
    double want_scale = 1.0, want_std = -1;
    if (n.find("qkv.weight") != std::string::npos || n.find("dense.weight") != std::string::npos ||
        n.find("fc1.weight") != std::string::npos) {
      want_scale = 0.25, want_std = std0 / 2.0;
    } else if (n.find("fc2.weight") != std::string::npos) {
      want_scale = 0.5, want_std = std0 / std::sqrt(2.0);
    } else if (n.find("embeddings.weight") != std::string::npos) {
      want_std = std0;  // the vocabulary / position dimension does not grow
    }
    EXPECT_EQ(p.lr_scale, want_scale) << n;
    if (want_std > 0) {
      const bool word = n == "embedding.word_embeddings.weight";  // its padding rows (vocabulary 100 of 128) are 0
      const double got = (word ? p.param.narrow(0, 0, 100) : p.param).std().item<double>();
      EXPECT_NEAR(got, want_std, 0.05 * want_std) << n;
    }
  }

  // Refused where the fork refuses it, or where megaton cannot apply it.
  c.model.kv_channels = 16;
  EXPECT_THROW(c.model.validate(), UsageError);
}

TEST(Mup, AdamLearningRateScaleIsMuAdamsGroups) {
  auto groups = optimtest::self_groups();
  optimtest::TinyModel ours, ref;
  ours.params[1].lr_scale = 0.25;  // fc1.weight
  ours.params[3].lr_scale = 0.5;   // fc2.weight
  parallel::DataParallel dp(ours.params, groups, {});
  optim::OptimizerOptions o;
  o.lr = 0.05;
  o.weight_decay = 0.1;
  o.clip_grad = 0;
  optim::MixedPrecisionOptimizer opt(dp, groups, o, nullptr);
  // mup.MuAdam's groups in AdamW: lr * scale and weight decay / scale (apex's decoupled decay is lr * wd * p).
  auto group = [&](std::vector<torch::Tensor> ps, double scale, double wd) {
    return torch::optim::OptimizerParamGroup(
        ps, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(o.lr * scale)
                                                             .betas({o.adam_beta1, o.adam_beta2})
                                                             .eps(o.adam_eps)
                                                             .weight_decay(wd / scale)));
  };
  torch::optim::AdamW reference({group({ref[0], ref[2], ref[4]}, 1.0, 0.0), group({ref[1]}, 0.25, o.weight_decay),
                                 group({ref[3]}, 0.5, o.weight_decay)},
                                torch::optim::AdamWOptions(o.lr));
  torch::manual_seed(3);
  for (int s = 0; s < 4; ++s) {
    const auto x = torch::randn({5, 4}), y = torch::randn({5, 3});
    opt.zero_grad();
    ours.loss(x, y).backward();
    opt.step();
    reference.zero_grad();
    ref.loss(x, y).backward();
    reference.step();
    for (size_t i = 0; i < 5; ++i)
      EXPECT_TRUE(torch::allclose(ours[i], ref[i], 1e-5, 1e-6)) << ours.params[i].name << " step " << s;
  }
}
