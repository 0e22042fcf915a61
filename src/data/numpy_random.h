// NumPy's legacy `np.random.RandomState(seed)` and its `shuffle`, bit for bit, so Megatron's sample order (doc_idx
// and shuffle_idx shuffles in gpt_dataset.py) is reproduced exactly. RandomState(seed) seeds MT19937 with
// init_genrand(seed) — what std::mt19937(seed) does — and shuffle() is Fisher-Yates from the last element with
// j = random_interval(i): draw 32-bit words (64-bit when i > 2^32-1), mask to the smallest 2^k-1 >= i, reject > i.
#pragma once
#include <cstdint>
#include <random>
#include <utility>

namespace megaton::data {

class NumpyRandomState {
 public:
  explicit NumpyRandomState(uint32_t seed) : mt_(seed) {}

  uint32_t next_uint32() { return static_cast<uint32_t>(mt_()); }
  uint64_t next_uint64() {
    const uint64_t hi = next_uint32();
    return (hi << 32) | next_uint32();
  }
  /// A uniform integer in [0, max] (numpy's random_interval).
  uint64_t random_interval(uint64_t max) {
    if (max == 0) return 0;
    uint64_t mask = max;
    mask |= mask >> 1, mask |= mask >> 2, mask |= mask >> 4, mask |= mask >> 8, mask |= mask >> 16, mask |= mask >> 32;
    uint64_t v;
    if (max <= 0xFFFFFFFFull) {
      while ((v = (next_uint32() & mask)) > max) {
      }
    } else {
      while ((v = (next_uint64() & mask)) > max) {
      }
    }
    return v;
  }
  /// In-place shuffle of a[0..n), as RandomState.shuffle on a 1-D array.
  template <typename T>
  void shuffle(T* a, uint64_t n) {
    for (uint64_t i = n; i-- > 1;) {
      const uint64_t j = random_interval(i);
      std::swap(a[i], a[j]);
    }
  }

 private:
  std::mt19937 mt_;
};

}  // namespace megaton::data
