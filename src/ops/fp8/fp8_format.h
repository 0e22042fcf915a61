// The two FP8 formats of Hopper's tensor cores (OCP 8-bit floating point, as cuBLASLt and Transformer Engine use
// them) and their rounding, on the host:
//   E4M3: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities; largest finite 448, smallest subnormal 2^-9.
//   E5M2: 1 sign, 5 exponent (bias 15), 2 mantissa bits; IEEE-like; largest finite 57344, smallest subnormal 2^-16.
// A value is cast to FP8 as the GPU's saturating conversion does (cvt.rn.satfinite): rounded to the nearest
// representable value, ties to the even code, and magnitudes beyond the largest finite value clamped to it; NaN stays
// NaN. fp8_round gives the cast's value as a float; quantize_dequantize applies it to a tensor under a per-tensor scale
// (the values the FP8 GEMM multiplies, back in the tensor's units), which is how the CPU computes an FP8 layer.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace megaton::ops::fp8 {

enum class Format { kE4M3, kE5M2 };

/// "e4m3" | "e5m2".
const char* format_name(Format f);
/// The largest finite magnitude: 448 (E4M3), 57344 (E5M2).
float format_max(Format f);

/// The value x takes when cast to `f` (round to nearest, ties to even, saturating to +-format_max(f)).
float fp8_round(float x, Format f);
/// The value of the FP8 code `code` of format `f` (NaN for NaN codes, +-inf for E5M2's infinities).
float fp8_decode(uint8_t code, Format f);

/// fp8_round(x * scale) * (1 / scale) elementwise, in fp32 whatever x's dtype (scale > 0 and finite): x's shape,
/// dtype fp32, on x's device.
torch::Tensor quantize_dequantize(const torch::Tensor& x, float scale, Format f);

}  // namespace megaton::ops::fp8
