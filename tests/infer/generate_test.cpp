// The KV cache and the decoding loop on one rank: feeding a sequence in pieces through the cache gives the logits of
// one full forward (every position encoding, GLU, query-key scaling); greedy generation with the cache produces the
// same tokens as --recompute; rows with longer prompts keep their prompt; EOS ends a row; lengths follow Megatron.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"
#include "dist/self_communicator.h"
#include "infer/generate_app.h"
#include "infer/generator.h"
#include "infer/infer_test_util.h"
#include "infer/stage_runner.h"
#include "model/gpt_stage.h"

using namespace megaton;

TEST(InferKvCache, PiecewiseCachedForwardEqualsFullForward) {
  const auto groups = dist::single_rank_groups();
  for (const char* positions : {"absolute", "rotary", "alibi"}) {
    for (const char* glu : {"", "swiglu"}) {
      auto c = infertest::byte_config(positions, glu);
      model::GptStage m(c, groups);
      m.set_training(false);
      torch::NoGradGuard ng;
      const auto ids = modeltest::tokens(3, 11, 257);  // [b, s]
      const auto full = m.forward(ids);                // [s, b, V]
      model::KvCache cache;
      std::vector<torch::Tensor> parts;
      for (auto [from, len] : std::vector<std::pair<int64_t, int64_t>>{{0, 5}, {5, 1}, {6, 1}, {7, 4}}) {
        parts.push_back(m.forward_cached(ids.narrow(1, from, len), cache));
        EXPECT_EQ(cache.length(), from + len);
      }
      const auto pieced = torch::cat(parts, 0);
      // Compare the real vocabulary (padding columns are -inf in both).
      EXPECT_LT(modeltest::rel_err(pieced.narrow(-1, 0, 257), full.narrow(-1, 0, 257)), 1e-5)
          << positions << " " << glu;
    }
  }
}

// On a GPU in bf16 the full forward folds ALiBi into the heads (exact bias); the KV cache's explicit attention adds the
// bias in fp32 there too, so feeding 200 positions in pieces gives the full forward's logits to bf16 accuracy, closer
// than the cache with Megatron's 16-bit bias (--no-alibi-fold's) gets to them.
TEST(KernelsKvCache, AlibiCachedForwardMatchesTheFoldedForward) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto groups = dist::single_rank_groups();
  auto c = infertest::byte_config("alibi");
  c.model.num_attention_heads = 4;  // head size 8: the fold needs d % 8 == 0
  c.model.kv_channels = 8;
  c.model.seq_length = c.model.max_position_embeddings = 256;
  c.dtype = torch::kBFloat16;
  c.device = torch::Device(torch::kCUDA, 0);
  torch::NoGradGuard ng;
  const auto ids = modeltest::tokens(2, 200, 257).to(c.device);  // [b, s]
  auto pieced = [&](model::GptStage& m) {
    model::KvCache cache;
    std::vector<torch::Tensor> parts;
    for (auto [from, len] : std::vector<std::pair<int64_t, int64_t>>{{0, 120}, {120, 1}, {121, 1}, {122, 78}})
      parts.push_back(m.forward_cached(ids.narrow(1, from, len), cache));
    return torch::cat(parts, 0).narrow(-1, 0, 257).to(torch::kFloat32);
  };
  model::GptStage fold(c, groups);
  fold.set_training(false);
  const torch::Tensor full = fold.forward(ids).narrow(-1, 0, 257).to(torch::kFloat32);  // [s, b, V]
  const double exact = modeltest::rel_err(pieced(fold), full);
  auto cm = c;
  cm.kernels.alibi_fold = false;
  model::GptStage masked(cm, groups);  // the same seed: the same weights
  masked.set_training(false);
  const double rounded = modeltest::rel_err(pieced(masked), full);
  EXPECT_LT(exact, 2e-2);
  EXPECT_GT(rounded, exact) << "the 16-bit bias should be further from the folded forward";
}

TEST(InferKvCache, CachedForwardRefusesTrainingMode) {
  auto c = infertest::byte_config();
  model::GptStage m(c, dist::single_rank_groups());
  model::KvCache cache;
  EXPECT_THROW(m.forward_cached(modeltest::tokens(1, 4, 257), cache), InternalError);
}

namespace {

infer::GenerateResult run(const model::GptConfig& c, const std::vector<std::vector<int32_t>>& ctx, bool recompute,
                          infer::SamplingOptions s, int64_t eos = -1, uint64_t seed = 5, int64_t out_len = 1024) {
  auto groups = dist::single_rank_groups();
  model::GptStage m(c, groups);
  infer::StageRunner runner(m, groups);
  infer::GenerateOptions o;
  o.sampling = s;
  o.seq_length = c.model.seq_length;
  o.out_seq_length = out_len;
  o.recompute = recompute;
  o.eos_id = eos;
  o.pad_id = 256;
  auto gen = at::detail::createCPUGenerator(seed);
  return infer::generate(runner, ctx, o, gen);
}

}  // namespace

TEST(InferGenerate, KvCacheEqualsRecomputeGreedyAndSampled) {
  const std::vector<std::vector<int32_t>> ctx{{72, 101, 108}, {1, 2, 3, 4, 5, 6}, {200}};
  for (const char* positions : {"absolute", "rotary", "alibi"}) {
    auto c = infertest::byte_config(positions);
    infer::SamplingOptions greedy;
    greedy.greedy = true;
    auto a = run(c, ctx, false, greedy), b = run(c, ctx, true, greedy);
    EXPECT_TRUE(torch::equal(a.tokens, b.tokens)) << positions;
    EXPECT_EQ(a.end, 16) << "runs to seq_length when no EOS";
    EXPECT_EQ(a.steps, b.steps);
    // Generation really depends on the context: another first token changes the continuation somewhere.
    auto other = run(c, {{73, 101, 108}, {1, 2, 3, 4, 5, 6}, {200}}, false, greedy);
    EXPECT_FALSE(torch::equal(a.tokens.narrow(1, 3, 13)[0], other.tokens.narrow(1, 3, 13)[0])) << positions;
    infer::SamplingOptions topk;
    topk.top_k = 5;
    auto s1 = run(c, ctx, false, topk), s2 = run(c, ctx, true, topk);
    EXPECT_TRUE(torch::equal(s1.tokens, s2.tokens)) << positions;
  }
}

TEST(InferGenerate, LongerPromptsAreKeptAndDecodingStartsAtTheShortest) {
  auto c = infertest::byte_config();
  infer::SamplingOptions greedy;
  greedy.greedy = true;
  const std::vector<std::vector<int32_t>> ctx{{10, 11}, {20, 21, 22, 23, 24}};
  auto r = run(c, ctx, false, greedy);
  auto t = r.tokens;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(t[1][i].item<int64_t>(), 20 + i);
  EXPECT_EQ(t[0][0].item<int64_t>(), 10);
  EXPECT_EQ(r.steps, 16 - 2) << "decoding starts at the shortest prompt (2) and fills positions 2..15";
  // Row 0 alone gives the same tokens as inside the batch (rows are independent).
  auto alone = run(c, {{10, 11}}, false, greedy);
  EXPECT_TRUE(torch::equal(alone.tokens[0], t[0]));
}

TEST(InferGenerate, EosFinishesARowAndOutSeqLengthCaps) {
  auto c = infertest::byte_config();
  infer::SamplingOptions greedy;
  greedy.greedy = true;
  auto free_run = run(c, {{5, 6, 7}}, false, greedy);
  // Declare the 2nd generated token the EOS: the run must stop right there.
  const int64_t eos = free_run.tokens[0][4].item<int64_t>();
  int64_t first_eos = 3;
  while (free_run.tokens[0][first_eos].item<int64_t>() != eos) ++first_eos;  // could already be at position 3
  auto r = run(c, {{5, 6, 7}}, false, greedy, eos);
  EXPECT_TRUE(r.finished[0]);
  EXPECT_EQ(r.lengths[0], first_eos);
  EXPECT_EQ(r.end, first_eos + 1);
  EXPECT_EQ(infer::row_tokens(r, 0).size(), size_t(first_eos));
  // --out-seq-length 4: maxlen = 3 + 4, positions 3..7 filled.
  auto capped = run(c, {{5, 6, 7}}, false, greedy, -1, 5, 4);
  EXPECT_EQ(capped.end, 8);
  EXPECT_EQ(capped.lengths[0], 7);
  EXPECT_FALSE(capped.finished[0]);
}

TEST(InferGenerate, PromptsMustFitTheSequence) {
  auto c = infertest::byte_config();
  infer::SamplingOptions greedy;
  greedy.greedy = true;
  EXPECT_THROW(run(c, {std::vector<int32_t>(16, 1)}, false, greedy), DataError);
  EXPECT_THROW(run(c, {{}}, false, greedy), DataError);
}

TEST(InferGenerate, OutputFormats) {
  infertest::ByteTokenizer tok;
  infer::GenerateResult r;
  // [EOD] a b c EOD: Megatron's record drops tokens[0] and the token before the EOS (tokens[1:length-1]).
  r.tokens = torch::tensor(std::vector<int64_t>{256, 97, 98, 99, 256, 256}).view({1, 6});
  r.lengths = {4};
  r.finished = {true};
  r.end = 5;
  EXPECT_EQ(infer::unconditional_record(r, 0, 16, tok), R"({"finished":true,"length":3,"text":"ab"})");
  // Ran to maxlen = seq_length - 1 = 5 without an EOS: not finished.
  r.lengths = {5};
  EXPECT_EQ(infer::unconditional_record(r, 0, 6, tok), R"({"finished":false,"length":4,"text":"abc"})");
  // Conditional: the continuation is the decoded text after as many characters as the prompt has.
  EXPECT_EQ(infer::conditional_block("h\xC3\xA9", "h\xC3\xA9llo"), "\nContext:h\xC3\xA9\n\nMegatron-LM:llo\n");
}
