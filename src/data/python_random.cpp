#include "data/python_random.h"

#include "core/error.h"

namespace megaton::data {

// The constants and steps of the MT19937 reference code (Matsumoto and Nishimura), as CPython's _randommodule.c has
// them.
namespace {
constexpr int kN = 624, kM = 397;
constexpr uint32_t kMatrixA = 0x9908b0dfU, kUpperMask = 0x80000000U, kLowerMask = 0x7fffffffU;
}  // namespace

PythonRandom::PythonRandom(uint64_t seed) {
  std::vector<uint32_t> key;
  for (uint64_t v = seed; v != 0; v >>= 32) key.push_back(static_cast<uint32_t>(v & 0xffffffffU));
  if (key.empty()) key.push_back(0);
  init_by_array(key);
}

void PythonRandom::init_genrand(uint32_t s) {
  mt_[0] = s;
  for (int i = 1; i < kN; ++i) mt_[i] = 1812433253U * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + static_cast<uint32_t>(i);
  mti_ = kN;
}

void PythonRandom::init_by_array(const std::vector<uint32_t>& key) {
  init_genrand(19650218U);
  int i = 1;
  size_t j = 0;
  const int len = static_cast<int>(key.size());
  for (int k = kN > len ? kN : len; k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525U)) + key[j] + static_cast<uint32_t>(j);
    ++i;
    ++j;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
    if (j >= key.size()) j = 0;
  }
  for (int k = kN - 1; k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941U)) - static_cast<uint32_t>(i);
    ++i;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
  }
  mt_[0] = 0x80000000U;
}

uint32_t PythonRandom::next_uint32() {
  if (mti_ >= kN) {
    int kk = 0;
    auto mag = [](uint32_t y) { return (y & 1U) ? kMatrixA : 0U; };
    for (; kk < kN - kM; ++kk) {
      const uint32_t y = (mt_[kk] & kUpperMask) | (mt_[kk + 1] & kLowerMask);
      mt_[kk] = mt_[kk + kM] ^ (y >> 1) ^ mag(y);
    }
    for (; kk < kN - 1; ++kk) {
      const uint32_t y = (mt_[kk] & kUpperMask) | (mt_[kk + 1] & kLowerMask);
      mt_[kk] = mt_[kk + (kM - kN)] ^ (y >> 1) ^ mag(y);
    }
    const uint32_t y = (mt_[kN - 1] & kUpperMask) | (mt_[0] & kLowerMask);
    mt_[kN - 1] = mt_[kM - 1] ^ (y >> 1) ^ mag(y);
    mti_ = 0;
  }
  uint32_t y = mt_[mti_++];
  y ^= (y >> 11);
  y ^= (y << 7) & 0x9d2c5680U;
  y ^= (y << 15) & 0xefc60000U;
  y ^= (y >> 18);
  return y;
}

uint32_t PythonRandom::getrandbits(int k) {
  MEGATON_ASSERT(k >= 1 && k <= 32, "getrandbits(", k, ")");
  return next_uint32() >> (32 - k);
}

int64_t PythonRandom::randint(int64_t a, int64_t b) {
  MEGATON_ASSERT(b >= a && b - a < int64_t{0xffffffff}, "randint(", a, ", ", b, ")");
  const uint64_t n = static_cast<uint64_t>(b - a) + 1;
  int k = 0;
  while ((n >> k) != 0) ++k;  // n.bit_length()
  uint64_t r = getrandbits(k);
  while (r >= n) r = getrandbits(k);
  return a + static_cast<int64_t>(r);
}

}  // namespace megaton::data
