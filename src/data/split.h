// Megatron's train/valid/test split by documents (dataset_utils.get_train_valid_test_split_, inventory §3.5):
// "949,50,1" (or "949/50/1", or one number) -> 3 weights padded with 0 and normalized; boundaries are
// idx[k+1] = idx[k] + round(w_k * size) (Python round: half to even), then shifted so that idx[3] == size.
#pragma once
#include <array>
#include <cstdint>
#include <string>

namespace megaton::data {

/// Python's round() to an integer: a half goes to the even neighbour (round(2.5) == 2, round(7.5) == 8).
int64_t round_half_even(double x);

/// The three normalized weights; UsageError naming --split on a malformed string or a zero sum.
std::array<double, 3> parse_split(const std::string& split);

/// Boundaries [0, a, b, size]: split k is items [idx[k], idx[k+1]).
std::array<int64_t, 4> split_boundaries(const std::string& split, int64_t size);

}  // namespace megaton::data
