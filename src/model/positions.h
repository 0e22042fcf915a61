// Position encodings of the BigScience variants (--position-embedding-type):
//   absolute  learned position embeddings added to the word embeddings (in embedding.cpp);
//   rotary    GPT-NeoX rotary embeddings on q and k, base 10000, over the full head dimension;
//   alibi     per-head linear bias slope_h * j added to the attention scores (j = key position).
#pragma once
#include <torch/torch.h>

#include <vector>

namespace megaton::model {

enum class PositionType { kAbsolute, kRotary, kAlibi };

PositionType parse_position_type(const std::string& name);

/// ALiBi slopes for n heads (Press et al.; Megatron's _build_alibi_tensor): for a power of two n,
/// start = 2^(-2^-(log2(n)-3)) and slopes start^(i+1); otherwise the slopes of the closest lower power of two,
/// followed by every other slope of twice that power, up to n.
std::vector<double> alibi_slopes(int heads);

/// The ALiBi bias of heads [head_begin, head_begin + count): [count, 1, seq], value slope_h * j, fp32.
torch::Tensor alibi_bias(int total_heads, int head_begin, int count, int64_t seq, torch::Device device);

/// cos and sin tables for positions [0, seq): each [seq, 1, 1, dim] fp32, angle(pos, i) = pos * 10000^(-2(i mod
/// dim/2)/dim) (the two halves of the head dimension share frequencies, as in GPT-NeoX).
std::pair<torch::Tensor, torch::Tensor> rotary_tables(int64_t seq, int64_t dim, torch::Device device,
                                                      double base = 10000.0);

/// Rotates x [s, b, heads, dim]: x * cos + rotate_half(x) * sin, rotate_half(x1 | x2) = (-x2 | x1); x's dtype kept.
torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

}  // namespace megaton::model
