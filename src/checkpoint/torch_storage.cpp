#include "checkpoint/torch_storage.h"

#include <utility>

#include "core/error.h"

namespace megaton::checkpoint {

namespace {
// UntypedStorage (torch >= 2) holds bytes; it comes last so that uint8 is written as ByteStorage.
constexpr std::pair<const char*, torch::ScalarType> kStorages[] = {
    {"torch.FloatStorage", torch::kFloat32}, {"torch.DoubleStorage", torch::kFloat64},
    {"torch.HalfStorage", torch::kFloat16},  {"torch.BFloat16Storage", torch::kBFloat16},
    {"torch.LongStorage", torch::kInt64},    {"torch.IntStorage", torch::kInt32},
    {"torch.ShortStorage", torch::kInt16},   {"torch.CharStorage", torch::kInt8},
    {"torch.ByteStorage", torch::kUInt8},    {"torch.BoolStorage", torch::kBool},
    {"torch.UntypedStorage", torch::kUInt8}};
}  // namespace

std::optional<torch::ScalarType> storage_dtype(const std::string& qualname) {
  for (const auto& [name, dtype] : kStorages)
    if (qualname == name) return dtype;
  return std::nullopt;
}

std::string storage_class(torch::ScalarType dtype) {
  for (const auto& [name, t] : kStorages)
    if (t == dtype) return name;
  throw InternalError(str("pickle: no torch storage class for ", c10::toString(dtype)));
}

}  // namespace megaton::checkpoint
