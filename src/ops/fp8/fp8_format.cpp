#include "ops/fp8/fp8_format.h"

#include <ATen/Parallel.h>

#include <cfenv>
#include <cmath>

#include "core/error.h"

namespace megaton::ops::fp8 {

namespace {

struct Layout {
  int mantissa_bits;
  int min_normal_exponent;  // of the smallest normal value, 2^e
  float max;
};

Layout layout_of(Format f) {
  return f == Format::kE4M3 ? Layout{3, -6, 448.0f} : Layout{2, -14, 57344.0f};
}

}  // namespace

const char* format_name(Format f) {
  return f == Format::kE4M3 ? "e4m3" : "e5m2";
}

float format_max(Format f) {
  return layout_of(f).max;
}

float fp8_round(float x, Format f) {
  if (std::isnan(x)) return x;
  const Layout l = layout_of(f);
  const float a = std::fabs(x);
  if (a >= l.max) return std::copysign(l.max, x);
  if (a == 0.0f) return x;
  int e2 = 0;
  std::frexp(a, &e2);  // a = m * 2^e2, m in [0.5, 1): a's binade is 2^(e2 - 1)
  const int e = std::max(e2 - 1, l.min_normal_exponent);
  // The spacing of representable values in that binade (the subnormals share the smallest normal binade's).
  const float quantum = std::ldexp(1.0f, e - l.mantissa_bits);
  const float steps = std::nearbyint(a / quantum);  // exact division by a power of two; ties to even steps
  return std::copysign(std::min(steps * quantum, l.max), x);
}

float fp8_decode(uint8_t code, Format f) {
  const Layout l = layout_of(f);
  const int exp_bits = 7 - l.mantissa_bits, bias = (1 << (exp_bits - 1)) - 1;
  const int e = (code >> l.mantissa_bits) & ((1 << exp_bits) - 1), m = code & ((1 << l.mantissa_bits) - 1);
  const float sign = (code & 0x80) ? -1.0f : 1.0f;
  if (f == Format::kE4M3 && e == 15 && m == 7) return std::nanf("");
  if (f == Format::kE5M2 && e == 31) return m == 0 ? sign * INFINITY : std::nanf("");
  const float magnitude = e == 0 ? std::ldexp(float(m), 1 - bias - l.mantissa_bits)
                                 : std::ldexp(1.0f + float(m) / float(1 << l.mantissa_bits), e - bias);
  return sign * magnitude;
}

torch::Tensor quantize_dequantize(const torch::Tensor& x, float scale, Format f) {
  MEGATON_CHECK(std::isfinite(scale) && scale > 0.0f, InternalError, "fp8 quantization: scale ", scale,
                " must be positive and finite");
  torch::Tensor in = x.detach().to(torch::kCPU, torch::kFloat32).contiguous();
  torch::Tensor out = torch::empty_like(in);
  const float* src = in.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  MEGATON_ASSERT(std::fegetround() == FE_TONEAREST, "the host rounding mode is not round-to-nearest");
  const float scale_inv = 1.0f / scale;  // as the GEMM applies it
  at::parallel_for(0, in.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) dst[i] = fp8_round(src[i] * scale, f) * scale_inv;
  });
  return x.device().is_cpu() ? out : out.to(x.device());
}

}  // namespace megaton::ops::fp8
