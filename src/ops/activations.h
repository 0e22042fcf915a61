// MLP activations. Megatron's default (fused bias-GeLU, or --openai-gelu) is the tanh approximation; with
// --no-bias-gelu-fusion it is the exact erf GeLU. The BigScience GLU variants split the fc1 output in two halves,
// x1 | x2 = chunk(2, -1), and return x1 * act(x2): geglu (erf GeLU), swiglu (SiLU), reglu (ReLU), liglu (identity).
#pragma once
#include <torch/torch.h>

#include <string>

namespace megaton::ops {

enum class Activation { kGeluTanh, kGeluErf, kGeglu, kSwiglu, kReglu, kLiglu };

/// From the flags: glu ("" | geglu | swiglu | reglu | liglu), openai_gelu, bias_gelu_fusion (= !--no-bias-gelu-fusion).
Activation activation_from_flags(const std::string& glu, bool openai_gelu, bool bias_gelu_fusion);
bool is_glu(Activation a);
const char* activation_name(Activation a);

/// Non-GLU: [.., f] -> [.., f]. GLU: [.., 2f] -> [.., f].
torch::Tensor apply_activation(const torch::Tensor& x, Activation a);

}  // namespace megaton::ops
