#include "checkpoint/format.h"

#include <cstdio>

#include "core/error.h"

namespace megaton::checkpoint {

std::string iteration_dir_name(int64_t iteration) {
  if (iteration == kReleaseIteration) return kReleaseName;
  MEGATON_ASSERT(iteration >= 0, "iteration ", iteration);
  char buf[32];
  std::snprintf(buf, sizeof buf, "iter_%07lld", static_cast<long long>(iteration));
  return buf;
}

std::string dtype_name(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat32:
      return "float32";
    case torch::kFloat64:
      return "float64";
    case torch::kFloat16:
      return "float16";
    case torch::kBFloat16:
      return "bfloat16";
    case torch::kInt64:
      return "int64";
    case torch::kInt32:
      return "int32";
    case torch::kUInt8:
      return "uint8";
    default:
      throw CheckpointError(str("checkpoint: tensors of dtype ", c10::toString(t), " cannot be stored"));
  }
}

torch::ScalarType dtype_from_name(const std::string& name, const std::string& where) {
  if (name == "float32") return torch::kFloat32;
  if (name == "float64") return torch::kFloat64;
  if (name == "float16") return torch::kFloat16;
  if (name == "bfloat16") return torch::kBFloat16;
  if (name == "int64") return torch::kInt64;
  if (name == "int32") return torch::kInt32;
  if (name == "uint8") return torch::kUInt8;
  throw CheckpointError(
      str(where, ": unknown dtype '", name, "' (expected float32, float64, float16, bfloat16, int64, int32 or uint8)"));
}

int64_t stored_bytes(const std::string& dtype_name, const std::vector<int64_t>& shape, const std::string& where) {
  int64_t n = static_cast<int64_t>(c10::elementSize(dtype_from_name(dtype_name, where)));
  for (const int64_t d : shape) n *= d;
  return n;
}

}  // namespace megaton::checkpoint
