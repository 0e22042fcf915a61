// bitsandbytes' dynamic quantization maps and its 8-bit codec (the state format of its blockwise optimizers, which
// the fork's --use-bnb-optimizer runs):
//   dynamic_map(true)   256 sorted values in [-0.993, 1]: the "dynamic" map of signed states (Adam's exp_avg);
//   dynamic_map(false)  256 sorted values in [0, 1]: the "udynamic" map of unsigned states (exp_avg_sq).
// A value x of a block is stored as the uint8 index of a map entry near x / absmax (quantize_codes: bitsandbytes'
// branchy binary search over the map, which is not always the nearest entry, reproduced as it decides), and read back
// as map[code] * absmax.
#pragma once
#include <torch/torch.h>

#include <array>

namespace megaton::optim {

/// The map as bitsandbytes' create_dynamic_map(signed) builds it (7 exponent bits, fractions from
/// torch.linspace(0.1, 1) midpoints), in fp32.
std::array<float, 256> dynamic_map(bool is_signed);

/// The map as an fp32 [256] tensor on `device`.
torch::Tensor dynamic_map_tensor(bool is_signed, torch::Device device);

/// Codes int64 (same shape as x) of x (fp32, any shape; normally in [-1, 1]) under `map` ([256] fp32 on x's device),
/// as bitsandbytes' quantize_2D picks them; `is_signed` also applies its sign rule (a code never flips the sign of a
/// nonzero value: it moves one step toward the value's sign instead). NaN gives code 0.
torch::Tensor quantize_codes(const torch::Tensor& map, const torch::Tensor& x, bool is_signed);

}  // namespace megaton::optim
