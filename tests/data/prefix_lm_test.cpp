// The prefix-LM split points, masks, loss masks and position ids equal a NumPy port of the fork's code with Python's
// own `random` (tests/data/prefix_lm_reference.py), element by element, per row and per document, with each option;
// Python's random.seed/getrandbits/randint reproduced draw for draw.
#include "data/prefix_lm.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/remove_tree.h"
#include "data/data_test_util.h"
#include "support/run_command.h"

namespace megaton::data {
namespace {

// Rows of 24 tokens over a vocabulary of 9 where 0 is the end of document: some end with it, some hold several.
std::vector<std::vector<int64_t>> rows() {
  std::vector<std::vector<int64_t>> out;
  for (int r = 0; r < 6; ++r) {
    std::vector<int64_t> row;
    for (int i = 0; i < 24; ++i) row.push_back((i * (r + 3) + r * 7 + 1) % 9);
    if (r == 2) row.back() = 0;
    // No empty documents (an end token first or right after another): the fork's randint raises on them.
    if (row[0] == 0) row[0] = 1;
    for (size_t i = 1; i < row.size(); ++i)
      if (row[i] == 0 && row[i - 1] == 0) row[i] = 2;
    out.push_back(row);
  }
  return out;
}

void expect_matches_reference(uint64_t seed, const PrefixLmOptions& o) {
  const std::string py = testing_support::python_with("numpy");
  if (py.empty()) GTEST_SKIP() << "no python3 with NumPy";
  const auto dir = testing::scratch_dir("prefixlm");
  const nlohmann::json c = {{"seed", seed},
                            {"eod", 0},
                            {"rows", rows()},
                            {"reset_position_ids", o.reset_position_ids},
                            {"reset_attention_mask", o.reset_attention_mask},
                            {"eod_mask_loss", o.eod_mask_loss},
                            {"loss_on_targets_only", o.loss_on_targets_only},
                            {"reweight", o.reweight_loss}};
  testing::write_file(dir / "case.json", c.dump());
  const std::string script = std::string(MEGATON_SOURCE_DIR) + "/tests/data/prefix_lm_reference.py";
  const std::string out = testing_support::run_command(py + " '" + script + "' '" + (dir / "case.json").string() + "'");
  nlohmann::json ref;
  ASSERT_NO_THROW(ref = nlohmann::json::parse(out)) << out;
  PythonRandom rng(seed);
  const auto all = rows();
  ASSERT_EQ(ref.size(), all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    const auto prefix = prefix_lm_indices(all[r], 0, o.reset_attention_mask, rng);
    EXPECT_EQ(prefix, ref[r].at("prefix").get<std::vector<int64_t>>()) << "row " << r;
    const PrefixLmMasks m = prefix_lm_masks(all[r], 0, prefix, o);
    EXPECT_EQ(m.loss_mask, ref[r].at("loss_mask").get<std::vector<float>>()) << "row " << r;
    EXPECT_EQ(m.position_ids, ref[r].at("position_ids").get<std::vector<int64_t>>()) << "row " << r;
    const int64_t s = static_cast<int64_t>(all[r].size());
    int64_t wrong = 0;
    for (int64_t q = 0; q < s; ++q)
      for (int64_t k = 0; k < s; ++k) wrong += m.attends[q * s + k] != ref[r].at("attends")[q][k].get<int>();
    EXPECT_EQ(wrong, 0) << "row " << r;
  }
  remove_tree(dir.string(), nullptr);
}

TEST(PythonRandom, DrawsAsPythonsRandomModule) {
  const std::string py = testing_support::python_with("numpy");
  if (py.empty()) GTEST_SKIP() << "no python3";
  // Seeds of one and two 32-bit words, and 0; bit counts below and at 32.
  for (const uint64_t seed : {uint64_t{0}, uint64_t{1234}, uint64_t{5} << 33 | 17}) {
    const std::string out = testing_support::run_command(
        py + " -c 'import random; random.seed(" + std::to_string(seed) +
        "); print([random.getrandbits(32) for _ in range(700)], [random.randint(1, 2047) for _ in range(50)], "
        "[random.getrandbits(5) for _ in range(5)])'");
    PythonRandom rng(seed);
    std::string mine = "[";
    for (int i = 0; i < 700; ++i) mine += (i ? ", " : "") + std::to_string(rng.getrandbits(32));
    mine += "] [";
    for (int i = 0; i < 50; ++i) mine += (i ? ", " : "") + std::to_string(rng.randint(1, 2047));
    mine += "] [";
    for (int i = 0; i < 5; ++i) mine += (i ? ", " : "") + std::to_string(rng.getrandbits(5));
    mine += "]\n";
    EXPECT_EQ(mine, out) << "seed " << seed;
  }
}

TEST(PrefixLm, PerRowPrefixesAndMasksEqualTheForks) {
  expect_matches_reference(1234, {});
  PrefixLmOptions o;
  o.loss_on_targets_only = true;
  o.eod_mask_loss = true;
  o.reweight_loss = true;
  expect_matches_reference(42, o);
}

TEST(PrefixLm, PerDocumentPrefixesAndMasksEqualTheForks) {
  PrefixLmOptions o;
  o.reset_attention_mask = true;
  o.reset_position_ids = true;
  o.loss_on_targets_only = true;
  expect_matches_reference(7, o);
  o.reset_position_ids = false;
  o.loss_on_targets_only = false;
  expect_matches_reference(8, o);
}

TEST(PrefixLm, EmptyDocumentsTakeTheSmallestPrefixWithoutADraw) {
  // End tokens at 0, 1 and 4: documents [0], [1], [2, 4], then a partial one [5, 8).
  PythonRandom a(3), b(3);
  const auto prefix = prefix_lm_indices({0, 0, 5, 6, 0, 7, 8, 9}, 0, true, a);
  ASSERT_EQ(prefix.size(), 4u);
  EXPECT_EQ(prefix[0], 1);
  EXPECT_EQ(prefix[1], 2);
  EXPECT_EQ(prefix[2], b.randint(3, 4));  // the first draw
  EXPECT_EQ(prefix[3], b.randint(6, 8));
}

TEST(PrefixLm, ARowByHand) {
  // Six tokens, prefix 3: the first three see each other both ways; the loss skips the first two (the third token
  // predicts the first target).
  PrefixLmOptions o;
  o.loss_on_targets_only = true;
  const PrefixLmMasks m = prefix_lm_masks({5, 6, 7, 8, 9, 4}, 0, {3}, o);
  EXPECT_EQ(m.attends[0 * 6 + 2], 1);  // token 0 sees token 2: bidirectional prefix
  EXPECT_EQ(m.attends[2 * 6 + 3], 0);  // the prefix does not see the targets
  EXPECT_EQ(m.attends[3 * 6 + 4], 0);  // targets stay causal
  EXPECT_EQ(m.attends[5 * 6 + 0], 1);
  EXPECT_EQ(m.loss_mask, (std::vector<float>{0, 0, 1, 1, 1, 1}));
}

}  // namespace
}  // namespace megaton::data
