#include "ops/activations.h"

#include "core/error.h"

namespace megaton::ops {

Activation activation_from_flags(const std::string& glu, bool openai_gelu, bool bias_gelu_fusion) {
  if (glu.empty()) return (openai_gelu || bias_gelu_fusion) ? Activation::kGeluTanh : Activation::kGeluErf;
  if (glu == "geglu") return Activation::kGeglu;
  if (glu == "swiglu") return Activation::kSwiglu;
  if (glu == "reglu") return Activation::kReglu;
  if (glu == "liglu") return Activation::kLiglu;
  throw UsageError(str("--glu-activation: expected geglu|swiglu|reglu|liglu, got '", glu, "'"));
}

bool is_glu(Activation a) {
  return a != Activation::kGeluTanh && a != Activation::kGeluErf;
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::kGeluTanh:
      return "gelu (tanh approximation)";
    case Activation::kGeluErf:
      return "gelu";
    case Activation::kGeglu:
      return "geglu";
    case Activation::kSwiglu:
      return "swiglu";
    case Activation::kReglu:
      return "reglu";
    case Activation::kLiglu:
      return "liglu";
  }
  return "?";
}

torch::Tensor apply_activation(const torch::Tensor& x, Activation a) {
  switch (a) {
    case Activation::kGeluTanh:
      return torch::gelu(x, "tanh");
    case Activation::kGeluErf:
      return torch::gelu(x);
    default:
      break;
  }
  auto halves = x.chunk(2, -1);
  const torch::Tensor& x1 = halves[0];
  const torch::Tensor& x2 = halves[1];
  switch (a) {
    case Activation::kGeglu:
      return x1 * torch::gelu(x2);
    case Activation::kSwiglu:
      return x1 * torch::silu(x2);
    case Activation::kReglu:
      return x1 * torch::relu(x2);
    case Activation::kLiglu:
      return x1 * x2;
    default:
      break;
  }
  MEGATON_ASSERT(false, "unhandled activation ", static_cast<int>(a));
  return {};
}

}  // namespace megaton::ops
