// The GPT stage on one rank: causality for every position type, recomputation and dropout determinism, padding
// invariance, the parameter contract, mixed precision, a finite-difference gradient check, and the training step.
#include "model/gpt_stage.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"
#include "dist/self_communicator.h"
#include "model/micro_batch.h"
#include "model/model_test_util.h"
#include "ops/attention.h"
#include "train/training_model.h"

using namespace megaton;
using modeltest::tiny_config;

namespace {

struct Outcome {
  torch::Tensor logits, loss;
  std::map<std::string, torch::Tensor> grads;
};

Outcome run(model::GptStage& m, const torch::Tensor& ids, const torch::Tensor& labels) {
  m.zero_grad();
  Outcome r;
  r.logits = m.forward(ids);
  r.loss = model::GptStage::masked_mean(m.token_losses(r.logits, labels), torch::ones(labels.sizes()));
  r.loss.backward();
  for (const auto& p : m.params()) r.grads[p.name] = p.param.grad().clone();
  return r;
}

double max_grad_diff(const Outcome& a, const Outcome& b) {
  double worst = 0;
  for (const auto& [name, g] : a.grads) worst = std::max(worst, modeltest::rel_err(g, b.grads.at(name)));
  return worst;
}

}  // namespace

TEST(ModelGpt, CausalForEveryPositionType) {
  auto groups = dist::single_rank_groups();
  for (const char* pos : {"absolute", "rotary", "alibi"}) {
    model::GptStage m(tiny_config(pos), groups);
    m.set_training(false);
    auto ids = modeltest::tokens(2, 8, 100);
    auto base = m.forward(ids).narrow(-1, 0, 100);  // [s, b, V]
    for (int64_t j : {1, 4, 7}) {
      auto changed = ids.clone();
      changed.select(1, j).add_(1).remainder_(100);
      auto out = m.forward(changed).narrow(-1, 0, 100);
      EXPECT_TRUE(torch::equal(out.narrow(0, 0, j), base.narrow(0, 0, j)))
          << pos << ": token " << j << " changed earlier logits";
      EXPECT_GT((out[j] - base[j]).abs().max().item<double>(), 1e-4) << pos << ": token " << j << " had no effect";
    }
  }
}

// --reset-attention-mask with --reset-position-ids: a packed sample's documents are modelled as if each were alone
// (logits and gradients), for every position type (rotary and ALiBi ignore the reset positions, as in Megatron: their
// scores depend on key positions only relative to the query, so the documents come out the same anyway).
TEST(ModelGpt, DocumentMaskModelsEachDocumentAlone) {
  auto groups = dist::single_rank_groups();
  const torch::Tensor ids = modeltest::tokens(2, 8, 100);                                                  // [b, s]
  const torch::Tensor doc = torch::tensor({0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1}).view({2, 8});  // [b, s]
  const int64_t split[2] = {3, 5};  // where each sample's second document starts
  torch::Tensor pos = torch::arange(8, torch::kInt64).unsqueeze(0).repeat({2, 1});
  for (int r = 0; r < 2; ++r) pos[r].narrow(0, split[r], 8 - split[r]).sub_(split[r]);
  const ops::Documents docs(doc, torch::kCPU);
  for (const char* type : {"absolute", "rotary", "alibi"}) {
    model::GptStage m(tiny_config(type), groups);
    m.set_training(false);
    const torch::Tensor packed = m.forward(ids, pos, docs).narrow(-1, 0, 100);  // [s, b, V]
    const torch::Tensor unmasked = m.forward(ids, pos).narrow(-1, 0, 100);
    for (int r = 0; r < 2; ++r) {
      const torch::Tensor first = m.forward(ids.narrow(0, r, 1).narrow(1, 0, split[r])).narrow(-1, 0, 100);
      const torch::Tensor second = m.forward(ids.narrow(0, r, 1).narrow(1, split[r], 8 - split[r])).narrow(-1, 0, 100);
      EXPECT_LT(modeltest::rel_err(packed.narrow(1, r, 1).narrow(0, 0, split[r]), first), 1e-5) << type << " " << r;
      EXPECT_LT(modeltest::rel_err(packed.narrow(1, r, 1).narrow(0, split[r], 8 - split[r]), second), 1e-5)
          << type << " " << r;
      EXPECT_GT((unmasked.narrow(1, r, 1).narrow(0, split[r], 8 - split[r]) - second).abs().max().item<double>(), 1e-3)
          << type << ": without the mask the second document sees the first";
    }
  }
  // Gradients (summed token losses): the packed first sample against its two documents alone.
  model::GptStage m(tiny_config("absolute"), groups);
  const torch::Tensor labels = modeltest::tokens(2, 8, 100, 7);
  m.zero_grad();
  m.token_losses(m.forward(ids.narrow(0, 0, 1), pos.narrow(0, 0, 1), ops::Documents(doc.narrow(0, 0, 1), torch::kCPU)),
                 labels.narrow(0, 0, 1))
      .sum()
      .backward();
  std::map<std::string, torch::Tensor> packed;
  for (const auto& p : m.params()) packed[p.name] = p.param.grad().clone();
  m.zero_grad();
  for (int64_t begin : {0, 3}) {
    const int64_t len = begin == 0 ? 3 : 5;
    m.token_losses(m.forward(ids.narrow(0, 0, 1).narrow(1, begin, len)), labels.narrow(0, 0, 1).narrow(1, begin, len))
        .sum()
        .backward();
  }
  for (const auto& p : m.params()) EXPECT_LT(modeltest::rel_err(packed[p.name], p.param.grad()), 1e-5) << p.name;
}

TEST(ModelGpt, RecomputationGivesTheSameGradientsWithDropout) {
  auto groups = dist::single_rank_groups();
  auto c = tiny_config("rotary", "swiglu");
  c.model.num_layers = 3;
  c.model.hidden_dropout = 0.2;
  c.model.attention_dropout = 0.2;
  auto ids = modeltest::tokens(2, 8, 100), labels = modeltest::tokens(2, 8, 100, 1);
  model::GptStage plain(c, groups);
  const Outcome a = run(plain, ids, labels);
  for (int chunk : {1, 2}) {
    auto cc = c;
    cc.model.checkpoint_activations = true;
    cc.model.checkpoint_num_layers = chunk;
    model::GptStage recomputed(cc, groups);
    const Outcome b = run(recomputed, ids, labels);
    EXPECT_LT(modeltest::rel_err(b.loss, a.loss), 1e-6) << "chunk " << chunk;
    EXPECT_LT(max_grad_diff(a, b), 1e-5) << "chunk " << chunk;
  }
}

TEST(ModelGpt, DropoutIsDeterministicPerSeedAndOffWhenZero) {
  auto groups = dist::single_rank_groups();
  auto c = tiny_config();
  c.model.hidden_dropout = 0.1;
  c.model.attention_dropout = 0.1;
  auto ids = modeltest::tokens(2, 8, 100);
  model::GptStage a(c, groups), b(c, groups);
  auto la = a.forward(ids), lb = b.forward(ids);
  EXPECT_TRUE(torch::equal(la, lb)) << "same seed, same masks";
  EXPECT_FALSE(torch::equal(la, a.forward(ids))) << "the stream advances between forwards";
  a.set_training(false);
  auto eval = a.forward(ids);
  EXPECT_FALSE(torch::equal(eval, la)) << "dropout was active in training";
  // Dropout 0 in training equals evaluation.
  model::GptStage z(tiny_config(), groups);
  auto zt = z.forward(ids).narrow(-1, 0, 100);  // the real vocabulary (training leaves padding to the loss)
  z.set_training(false);
  EXPECT_TRUE(torch::equal(zt, z.forward(ids).narrow(-1, 0, 100)));
  // Megatron's seeds: TP stream = seed + 100 pp + 2718 + tp.
  EXPECT_EQ(parallel::RngTracker::tp_seed(1234, 3, 2), 1234u + 200u + 2718u + 3u);
}

TEST(ModelGpt, PaddingDoesNotChangeTheModel) {
  auto groups = dist::single_rank_groups();
  auto c128 = tiny_config("alibi");
  auto c104 = c128;
  c104.padded_vocab_size = 104;
  model::GptStage a(c128, groups), b(c104, groups);
  auto ids = modeltest::tokens(2, 8, 100), labels = modeltest::tokens(2, 8, 100, 2);
  const Outcome ra = run(a, ids, labels), rb = run(b, ids, labels);
  // Equal to rounding: the BLAS may block a GEMM of 128 output columns differently from one of 104 (OpenBLAS on an
  // AVX-512 CPU does, by an ulp here and there).
  EXPECT_LT(modeltest::rel_err(ra.logits.narrow(-1, 0, 100), rb.logits.narrow(-1, 0, 100)), 1e-6);
  a.set_training(false);  // training logits leave padding to the loss; evaluation logits mask it
  EXPECT_TRUE(torch::isinf(a.forward(ids).narrow(-1, 100, 28)).all().item<bool>());
  a.set_training(true);
  EXPECT_LT(modeltest::rel_err(ra.loss, rb.loss), 1e-6);
  const auto& ga = ra.grads.at("embedding.word_embeddings.weight");
  EXPECT_EQ(ga.narrow(0, 100, 28).abs().max().item<double>(), 0.0) << "padding rows get no gradient";
  EXPECT_LT(modeltest::rel_err(ga.narrow(0, 0, 100), rb.grads.at("embedding.word_embeddings.weight").narrow(0, 0, 100)),
            1e-6);
  for (const auto& p : a.params())
    if (p.name == "embedding.word_embeddings.weight") {
      EXPECT_EQ(p.global_unpadded_rows, 100);
      EXPECT_EQ(p.param.narrow(0, 100, 28).abs().max().item<double>(), 0.0) << "padding rows start at zero";
    }
}

TEST(ModelGpt, ParameterListFollowsTheContract) {
  auto c = tiny_config("absolute", "geglu");
  c.model.embed_layernorm = true;
  model::GptStage m(c, dist::single_rank_groups());
  auto ps = modeltest::by_name(m.params());
  const int64_t h = 32, f = 64;
  const std::map<std::string, std::vector<int64_t>> shapes{{"embedding.word_embeddings.weight", {128, h}},
                                                           {"embedding.position_embeddings.weight", {16, h}},
                                                           {"embedding.norm.weight", {h}},
                                                           {"layers.1.input_layernorm.bias", {h}},
                                                           {"layers.1.attention.qkv.weight", {8, 3, 4, h}},
                                                           {"layers.1.attention.qkv.bias", {8, 3, 4}},
                                                           {"layers.1.attention.dense.weight", {h, h}},
                                                           {"layers.1.mlp.fc1.weight", {2, f, h}},
                                                           {"layers.1.mlp.fc1.bias", {2, f}},
                                                           {"layers.1.mlp.fc2.weight", {h, f}},
                                                           {"final_layernorm.bias", {h}}};
  for (const auto& [name, shape] : shapes) {
    ASSERT_TRUE(ps.count(name)) << name;
    EXPECT_EQ(ps[name].global_shape, shape) << name;
    int64_t n = 1;
    for (auto d : shape) n *= d;
    EXPECT_EQ(ps[name].param.numel(), n) << name;
    EXPECT_TRUE(ps[name].param.is_leaf() && ps[name].param.requires_grad() && ps[name].param.is_contiguous()) << name;
  }
  EXPECT_EQ(ps.size(), 4u + 12u * 2u + 2u);
  EXPECT_EQ(ps["layers.0.attention.qkv.weight"].partition_dim, 0);
  EXPECT_EQ(ps["layers.0.mlp.fc1.weight"].partition_dim, 1);
  EXPECT_EQ(ps["layers.0.mlp.fc2.weight"].partition_dim, 1);
  EXPECT_EQ(ps["layers.0.attention.dense.bias"].partition_dim, -1);
  EXPECT_TRUE(ps["layers.0.mlp.fc1.bias"].no_weight_decay && ps["embedding.norm.bias"].no_weight_decay);
  EXPECT_FALSE(ps["layers.0.mlp.fc1.weight"].no_weight_decay || ps["embedding.word_embeddings.weight"].no_weight_decay);
  EXPECT_FALSE(ps["embedding.word_embeddings.weight"].tied_embedding) << "PP = 1: nothing to sum over";
  // Scaled init of output projections: std / sqrt(2 * layers) = 0.2 / 2.
  EXPECT_NEAR(ps["layers.0.mlp.fc2.weight"].param.std().item<double>(), 0.1, 0.02);
  EXPECT_NEAR(ps["layers.0.mlp.fc1.weight"].param.std().item<double>(), 0.2, 0.02);
  EXPECT_EQ(ps["layers.0.attention.qkv.bias"].param.abs().sum().item<double>(), 0.0);
  // Different names draw different values.
  EXPECT_FALSE(torch::equal(ps["layers.0.mlp.fc1.weight"].param, ps["layers.1.mlp.fc1.weight"].param));
}

TEST(ModelGpt, UntiedOutputLayerIsItsOwnParameter) {
  auto c = tiny_config();
  c.model.untie_embeddings_and_output_weights = true;
  model::GptStage m(c, dist::single_rank_groups());
  auto ps = modeltest::by_name(m.params());
  ASSERT_TRUE(ps.count("output_layer.weight"));
  EXPECT_EQ(ps["output_layer.weight"].global_unpadded_rows, 100);
  Outcome r = run(m, modeltest::tokens(1, 8, 100), modeltest::tokens(1, 8, 100, 3));
  EXPECT_GT(r.grads.at("output_layer.weight").abs().sum().item<double>(), 0.0);
}

TEST(ModelGpt, GradientsMatchFiniteDifferencesInFp64) {
  auto c = tiny_config("rotary", "reglu");
  c.dtype = torch::kFloat64;
  c.model.embed_layernorm = true;
  model::GptStage m(c, dist::single_rank_groups());
  auto ids = modeltest::tokens(1, 6, 100), labels = modeltest::tokens(1, 6, 100, 4);
  auto mask = torch::tensor({1.0, 1.0, 0.0, 1.0, 1.0, 1.0}).view({1, 6});
  auto loss_of = [&] { return model::GptStage::masked_mean(m.token_losses(m.forward(ids), labels), mask); };
  m.zero_grad();
  loss_of().backward();
  int checked = 0;
  for (const auto& p : m.params()) {
    auto flat = p.param.detach().view(-1);
    auto grad = p.param.grad().view(-1);
    const int64_t i = (p.param.numel() * 7 / 11);  // one fixed entry per parameter
    const double eps = 1e-6, keep = flat[i].item<double>();
    torch::NoGradGuard ng;
    flat[i] = keep + eps;
    const double up = loss_of().item<double>();
    flat[i] = keep - eps;
    const double down = loss_of().item<double>();
    flat[i] = keep;
    EXPECT_NEAR(grad[i].item<double>(), (up - down) / (2 * eps), 1e-6 + 1e-4 * std::abs((up - down) / (2 * eps)))
        << p.name;
    ++checked;
  }
  EXPECT_GT(checked, 20);
}

TEST(ModelGpt, Bf16ModelTracksFp32) {
  auto groups = dist::single_rank_groups();
  auto c = tiny_config("alibi");
  model::GptStage ref(c, groups);
  c.dtype = torch::kBFloat16;
  model::GptStage bf(c, groups);
  for (const auto& p : bf.params()) EXPECT_EQ(p.param.scalar_type(), torch::kBFloat16) << p.name;
  auto ids = modeltest::tokens(2, 8, 100), labels = modeltest::tokens(2, 8, 100, 5);
  const Outcome a = run(ref, ids, labels), b = run(bf, ids, labels);
  EXPECT_EQ(b.logits.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(b.loss.scalar_type(), torch::kFloat32) << "the loss is computed in fp32";
  EXPECT_LT(std::abs(a.loss.item<double>() - b.loss.item<double>()), 0.05 * a.loss.item<double>());
  EXPECT_TRUE(torch::isfinite(b.grads.at("layers.1.attention.qkv.weight").to(torch::kFloat32)).all().item<bool>());
}

// --fp32-residual-connection: a bf16 model whose residual stream (the embeddings, each layer's sums, what a pipeline
// stage hands on) stays fp32, as Megatron's. Split into two stages with an fp32 hand-over it gives the one-stage
// model's logits bit for bit; the stream carries values bf16 cannot hold; without the flag it is bf16.
TEST(ModelGpt, Fp32ResidualConnectionKeepsTheStreamInFp32) {
  auto groups = dist::single_rank_groups();
  auto c = tiny_config();
  c.model.num_layers = 4;
  c.dtype = torch::kBFloat16;
  const auto ids = modeltest::tokens(2, 8, 100);
  model::GptStage plain_first(c, groups, model::pipeline_stage_part(c, 2, 0));
  torch::NoGradGuard no_grad;
  EXPECT_EQ(plain_first.forward(ids).scalar_type(), torch::kBFloat16);
  const torch::Tensor plain_logits = model::GptStage(c, groups).forward(ids);

  c.model.fp32_residual_connection = true;
  EXPECT_EQ(c.residual_dtype(), torch::kFloat32);
  model::GptStage whole(c, groups), first(c, groups, model::pipeline_stage_part(c, 2, 0)),
      last(c, groups, model::pipeline_stage_part(c, 2, 1));
  const torch::Tensor h = first.forward(ids);  // [s, b, h] after layers 0-1
  ASSERT_EQ(h.scalar_type(), torch::kFloat32);
  EXPECT_FALSE(torch::equal(h, h.to(torch::kBFloat16).to(torch::kFloat32))) << "the stream was rounded to bf16";
  const torch::Tensor logits = whole.forward(ids);
  EXPECT_EQ(logits.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(last.forward(h), logits)) << "two stages with an fp32 hand-over differ from one";
  EXPECT_FALSE(torch::equal(logits, plain_logits)) << "the flag changed nothing";
  EXPECT_LT(modeltest::rel_err(logits, plain_logits), 0.05);
}

TEST(ModelGpt, BadInputIsATypedError) {
  model::GptStage m(tiny_config(), dist::single_rank_groups());
  auto ids = modeltest::tokens(1, 8, 100);
  ids[0][3] = 100;  // == vocab size
  EXPECT_THROW(m.forward(ids), DataError);
  EXPECT_THROW(m.forward(modeltest::tokens(1, 17, 100)), DataError);  // longer than the 16 learned positions
  EXPECT_THROW(m.forward(torch::zeros({1, 8})), DataError);           // not token ids
  auto c = tiny_config();
  c.model.num_attention_heads = 6;
  c.model.kv_channels = 4;
  dist::ProcessGroups g = dist::single_rank_groups();
  EXPECT_NO_THROW(model::validate_gpt_config(c, 1, 1));
  EXPECT_THROW(model::validate_gpt_config(c, 4, 1), UsageError);              // 6 heads over TP=4
  EXPECT_THROW(model::validate_gpt_config(tiny_config(), 1, 3), UsageError);  // 2 layers over PP=3
}

TEST(ModelGpt, LayerPartition) {
  auto c = tiny_config();
  c.model.num_layers = 8;
  EXPECT_EQ(model::partition_layers(c, 3), (std::vector<int>{3, 3, 2}));
  EXPECT_EQ(model::partition_layers(c, 1), (std::vector<int>{8}));
  // "parameters": a large vocabulary weighs on the first and last stage, which get fewer layers.
  c.pp_partition_method = "parameters";
  c.padded_vocab_size = 128 * 100;  // 12800 x 32 per end, ~3 layers' worth
  c.vocab_size = 12800;
  auto parts = model::partition_layers(c, 4);
  int total = 0;
  for (int n : parts) {
    total += n;
    EXPECT_GE(n, 1);
  }
  EXPECT_EQ(total, 8);
  EXPECT_LT(parts.front(), parts[1]);
  EXPECT_LT(parts.back(), parts[2]);
  c.pp_partition_method = "bogus";
  EXPECT_THROW(model::partition_layers(c, 2), UsageError);
}

// One training iteration as the trainer runs it (train::TrainingModel over the pipeline schedule; PP = 1): each
// micro-batch's masked mean loss / M backpropagated. Returns the mean loss.
static double train_iteration(train::TrainingModel& model, const std::vector<model::MicroBatch>& mbs) {
  const int m = static_cast<int>(mbs.size());
  double loss = 0;
  auto forward = [&](int chunk, int mb, const torch::Tensor& input) {
    torch::Tensor out = model.forward_step(chunk, mbs[static_cast<size_t>(mb)], input);
    loss += out.item<double>() / m;
    return out / m;
  };
  model.run_schedule(m, static_cast<int>(mbs.front().tokens.size(0)), static_cast<int>(mbs.front().tokens.size(1)),
                     forward, {}, false);
  return loss;
}

TEST(ModelGpt, TrainingStepAveragesMicroBatchesAndDescends) {
  auto groups = dist::single_rank_groups();
  train::TrainingModel tm(tiny_config("rotary"), groups, 0, Logger(0, 1, LogLevel::kWarning));
  model::GptStage& m = tm.chunk(0);
  std::vector<model::MicroBatch> mbs;
  for (int i = 0; i < 2; ++i)
    mbs.push_back({modeltest::tokens(2, 8, 100, i), modeltest::tokens(2, 8, 100, i + 10), torch::ones({2, 8}), {}});
  // The step's gradient is the mean of the micro-batches' gradients.
  m.zero_grad();
  const double step_loss = train_iteration(tm, mbs);
  std::map<std::string, torch::Tensor> g_step;
  for (const auto& p : m.params()) g_step[p.name] = p.param.grad().clone();
  std::map<std::string, torch::Tensor> g_sum;
  double loss_sum = 0;
  for (const auto& mb : mbs) {
    m.zero_grad();
    auto loss = model::GptStage::masked_mean(m.token_losses(m.forward(mb.tokens), mb.labels), mb.loss_mask);
    loss.backward();
    loss_sum += loss.item<double>();
    for (const auto& p : m.params())
      g_sum[p.name] = g_sum.count(p.name) ? g_sum[p.name] + p.param.grad() : p.param.grad().clone();
  }
  EXPECT_NEAR(step_loss, loss_sum / 2, 1e-5);
  for (const auto& [name, g] : g_step) EXPECT_LT(modeltest::rel_err(g, g_sum[name] / 2), 1e-5) << name;
  // Plain gradient descent on these gradients lowers the loss.
  double first = step_loss, last = 0;
  for (int it = 0; it < 5; ++it) {
    m.zero_grad();
    last = train_iteration(tm, mbs);
    torch::NoGradGuard ng;
    for (const auto& p : m.params()) p.param.sub_(p.param.grad() * 0.05);
  }
  EXPECT_LT(last, first - 0.05);
}
