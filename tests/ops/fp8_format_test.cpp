// FP8 rounding against the formats' code tables, decoded here bit by bit from the OCP FP8 definitions: every code's
// value rounds to itself, every value between two neighbours goes to the nearer one (ties to the even code), and
// magnitudes past the largest finite value saturate.
#include "ops/fp8/fp8_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

using megaton::ops::fp8::Format;
using megaton::ops::fp8::fp8_round;

namespace {

struct Code {
  float value;
  int code;  // the 7 magnitude bits
};

// The finite non-negative values of a format, ascending, with their codes.
std::vector<Code> positive_codes(Format f) {
  const int exp_bits = f == Format::kE4M3 ? 4 : 5, man_bits = 7 - exp_bits;
  const int bias = (1 << (exp_bits - 1)) - 1;
  std::vector<Code> out;
  for (int c = 0; c < 128; ++c) {
    const int e = c >> man_bits, m = c & ((1 << man_bits) - 1);
    if (f == Format::kE4M3 && e == 15 && m == 7) continue;  // E4M3's only NaN; no infinities
    if (f == Format::kE5M2 && e == 31) continue;            // infinities and NaNs
    const float v = e == 0 ? std::ldexp(float(m), 1 - bias - man_bits)
                           : std::ldexp(1.0f + float(m) / float(1 << man_bits), e - bias);
    out.push_back({v, c});
  }
  return out;
}

void check_decode(Format f) {
  for (const auto& c : positive_codes(f)) {
    EXPECT_EQ(megaton::ops::fp8::fp8_decode(uint8_t(c.code), f), c.value) << c.code;
    EXPECT_EQ(megaton::ops::fp8::fp8_decode(uint8_t(c.code | 0x80), f), -c.value) << c.code;
  }
}

void check_format(Format f, float max, float min_subnormal) {
  const auto codes = positive_codes(f);
  EXPECT_EQ(codes.back().value, max);
  EXPECT_EQ(codes[1].value, min_subnormal);
  for (const auto& c : codes) {
    EXPECT_EQ(fp8_round(c.value, f), c.value) << c.code;
    EXPECT_EQ(fp8_round(-c.value, f), -c.value) << c.code;
  }
  for (size_t i = 0; i + 1 < codes.size(); ++i) {
    const float lo = codes[i].value, hi = codes[i + 1].value, mid = 0.5f * (lo + hi);
    const float even = (codes[i].code % 2 == 0) ? lo : hi;
    EXPECT_EQ(fp8_round(mid, f), even) << "tie between " << lo << " and " << hi;
    EXPECT_EQ(fp8_round(-mid, f), -even);
    EXPECT_EQ(fp8_round(std::nextafter(mid, lo), f), lo);
    EXPECT_EQ(fp8_round(std::nextafter(mid, hi), f), hi);
  }
  // Random values go to the nearest code.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> log2u(std::log2(min_subnormal) - 2, std::log2(max) + 1);
  for (int k = 0; k < 20000; ++k) {
    const float x = std::exp2(log2u(rng));
    float best = codes.front().value;
    for (const auto& c : codes)
      if (std::fabs(c.value - x) < std::fabs(best - x)) best = c.value;
    const float got = fp8_round(x, f);
    EXPECT_LE(std::fabs(got - x), std::fabs(best - x)) << x;
    EXPECT_EQ(got, best) << x;
  }
  EXPECT_EQ(fp8_round(max * 1.01f, f), max);
  EXPECT_EQ(fp8_round(-1e30f, f), -max);
  EXPECT_EQ(fp8_round(INFINITY, f), max);  // the saturating cast
  EXPECT_TRUE(std::isnan(fp8_round(NAN, f)));
  EXPECT_EQ(fp8_round(0.4f * min_subnormal, f), 0.0f);
  EXPECT_EQ(fp8_round(0.6f * min_subnormal, f), min_subnormal);
}

}  // namespace

TEST(Fp8Format, E4M3RoundsToNearestCodeTiesToEvenAndSaturates) {
  check_format(Format::kE4M3, 448.0f, std::ldexp(1.0f, -9));
}

TEST(Fp8Format, E5M2RoundsToNearestCodeTiesToEvenAndSaturates) {
  check_format(Format::kE5M2, 57344.0f, std::ldexp(1.0f, -16));
}

TEST(Fp8Format, DecodeGivesEachCodesValue) {
  check_decode(Format::kE4M3);
  check_decode(Format::kE5M2);
  EXPECT_TRUE(std::isnan(megaton::ops::fp8::fp8_decode(0x7f, Format::kE4M3)));
  EXPECT_EQ(megaton::ops::fp8::fp8_decode(0x7c, Format::kE5M2), INFINITY);
  EXPECT_TRUE(std::isnan(megaton::ops::fp8::fp8_decode(0x7d, Format::kE5M2)));
}

TEST(Fp8Format, QuantizeDequantizeAppliesTheScale) {
  const torch::Tensor x = torch::tensor({0.01f, -0.3f, 1.7f, 100.0f, 5000.0f});
  const float scale = 4.0f;
  const torch::Tensor y = megaton::ops::fp8::quantize_dequantize(x.to(torch::kBFloat16), scale, Format::kE4M3);
  ASSERT_EQ(y.scalar_type(), torch::kFloat32);
  const torch::Tensor xb = x.to(torch::kBFloat16).to(torch::kFloat32);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float v = xb[i].item<float>();
    EXPECT_EQ(y[i].item<float>(), fp8_round(v * scale, Format::kE4M3) * (1.0f / scale)) << v;
  }
  EXPECT_EQ(y[4].item<float>(), 448.0f / scale);  // saturated
}
