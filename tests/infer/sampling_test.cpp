// Sampling: greedy is argmax; top-k keeps exactly the k largest; top-p keeps Megatron's nucleus (the token crossing p
// included, the top-1 always); sampled tokens stay inside the kept set and follow the renormalised probabilities.
#include "infer/sampling.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <set>

#include "core/error.h"

using namespace megaton;

namespace {

// log of probabilities [0.05, 0.5, 0.15, 0.3] (token 1 most likely, then 3, 2, 0), batch of 2 (second row reversed).
torch::Tensor known_logits() {
  torch::Tensor p = torch::tensor({0.05, 0.5, 0.15, 0.3}, torch::kFloat32);
  return torch::stack({p.log(), p.flip(0).log()});  // [2, 4]
}

std::set<int64_t> kept(const torch::Tensor& filtered_row) {
  std::set<int64_t> s;
  for (int64_t i = 0; i < filtered_row.size(0); ++i)
    if (std::isfinite(filtered_row[i].item<float>())) s.insert(i);
  return s;
}

}  // namespace

TEST(InferSampling, GreedyIsArgmax) {
  auto gen = at::detail::createCPUGenerator(1);
  infer::SamplingOptions o;
  o.greedy = true;
  auto t = infer::sample_next(known_logits(), o, gen);
  EXPECT_EQ(t[0].item<int64_t>(), 1);
  EXPECT_EQ(t[1].item<int64_t>(), 2);
}

TEST(InferSampling, TopKKeepsTheKLargest) {
  auto f = infer::filter_logits(known_logits(), 2, 0.0);
  EXPECT_EQ(kept(f[0]), (std::set<int64_t>{1, 3}));
  EXPECT_EQ(kept(f[1]), (std::set<int64_t>{2, 0}));
  EXPECT_EQ(kept(infer::filter_logits(known_logits(), 1, 0.0)[0]), (std::set<int64_t>{1}));
  EXPECT_EQ(kept(infer::filter_logits(known_logits(), 10, 0.0)[0]).size(), 4u);  // k > V keeps all
  // Kept logits are unchanged.
  EXPECT_FLOAT_EQ(f[0][1].item<float>(), std::log(0.5f));
}

TEST(InferSampling, TopPKeepsTheNucleusWithTheCrossingToken) {
  // Sorted mass: 0.5, 0.8, 0.95, 1.0.
  EXPECT_EQ(kept(infer::filter_logits(known_logits(), 0, 0.4)[0]), (std::set<int64_t>{1}));     // top-1 always
  EXPECT_EQ(kept(infer::filter_logits(known_logits(), 0, 0.5)[0]), (std::set<int64_t>{1, 3}));  // 0.5 is not > 0.5
  EXPECT_EQ(kept(infer::filter_logits(known_logits(), 0, 0.7)[0]), (std::set<int64_t>{1, 3}));  // 0.8 crosses
  EXPECT_EQ(kept(infer::filter_logits(known_logits(), 0, 0.9)[0]), (std::set<int64_t>{1, 3, 2}));
  EXPECT_EQ(kept(infer::filter_logits(known_logits(), 0, 0.9)[1]), (std::set<int64_t>{2, 0, 1}));  // per row
  // top-k first, then top-p on what is left: k=3 leaves {1,3,2} renormalised to 0.5/0.95, ...; p=0.6 keeps {1,3}.
  EXPECT_EQ(kept(infer::filter_logits(known_logits(), 3, 0.6)[0]), (std::set<int64_t>{1, 3}));
}

TEST(InferSampling, SamplesStayInsideTheBoundsWithRenormalisedFrequencies) {
  auto gen = at::detail::createCPUGenerator(7);
  infer::SamplingOptions o;
  o.top_k = 2;
  const int n = 4000;
  torch::Tensor logits = known_logits()[0].unsqueeze(0).expand({n, 4}).contiguous();  // [n, 4]
  torch::Tensor t = infer::sample_next(logits, o, gen);
  auto counts = torch::bincount(t, {}, 4);
  EXPECT_EQ(counts[0].item<int64_t>(), 0);
  EXPECT_EQ(counts[2].item<int64_t>(), 0);
  // P(1) = 0.5 / 0.8 = 0.625 after renormalisation; 4000 draws: sd ~0.008.
  EXPECT_NEAR(counts[1].item<double>() / n, 0.625, 0.04);

  o.top_k = 0;
  o.top_p = 0.9;  // keeps {1, 3, 2}: P(2) = 0.15 / 0.95
  t = infer::sample_next(logits, o, gen);
  counts = torch::bincount(t, {}, 4);
  EXPECT_EQ(counts[0].item<int64_t>(), 0);
  EXPECT_NEAR(counts[2].item<double>() / n, 0.15 / 0.95, 0.03);

  // Temperature: T -> small concentrates on the argmax; T = 2 flattens (P(0) = sqrt(.05)/sum sqrt(p)).
  o.top_p = 0.0;
  o.temperature = 2.0;
  t = infer::sample_next(logits, o, gen);
  counts = torch::bincount(t, {}, 4);
  const double z = std::sqrt(0.05) + std::sqrt(0.5) + std::sqrt(0.15) + std::sqrt(0.3);
  EXPECT_NEAR(counts[0].item<double>() / n, std::sqrt(0.05) / z, 0.03);
}

TEST(InferSampling, SameGeneratorStateSameTokens) {
  infer::SamplingOptions o;
  torch::Tensor logits = known_logits();
  auto g1 = at::detail::createCPUGenerator(99), g2 = at::detail::createCPUGenerator(99);
  for (int i = 0; i < 20; ++i)
    EXPECT_TRUE(torch::equal(infer::sample_next(logits, o, g1), infer::sample_next(logits, o, g2)));
}

TEST(InferSampling, BadFlagsAreUsageErrors) {
  infer::SamplingOptions o;
  o.temperature = 0.0;
  EXPECT_THROW(infer::validate_sampling(o), UsageError);
  o = {};
  o.top_k = -1;
  EXPECT_THROW(infer::validate_sampling(o), UsageError);
  o = {};
  o.top_p = 1.5;
  EXPECT_THROW(infer::validate_sampling(o), UsageError);
  o = {};
  EXPECT_NO_THROW(infer::validate_sampling(o));
}
