// Python's `random` module (random.seed(int), getrandbits, randint), draw for draw: the fork draws its prefix-LM split
// points with the global `random.randint` after Megatron seeds it with random.seed(seed). MT19937 seeded by
// init_by_array over the seed's 32-bit words (least significant first; [0] for 0), as CPython's random_seed does;
// getrandbits(k <= 32) is the next word's top k bits; randint(a, b) draws k = bit_length(b - a + 1) bits until the
// value is below b - a + 1.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

namespace megaton::data {

class PythonRandom {
 public:
  /// random.seed(seed) for a non-negative int.
  explicit PythonRandom(uint64_t seed);

  uint32_t next_uint32();
  /// random.getrandbits(k), 1 <= k <= 32.
  uint32_t getrandbits(int k);
  /// random.randint(a, b): uniform in [a, b], b - a < 2^32 - 1.
  int64_t randint(int64_t a, int64_t b);

 private:
  void init_genrand(uint32_t s);
  void init_by_array(const std::vector<uint32_t>& key);
  std::array<uint32_t, 624> mt_{};
  int mti_ = 625;
};

}  // namespace megaton::data
