// torch's typed storage classes, as a pickle names them ("torch.FloatStorage"): the one table the pickle reader and
// writer share.
#pragma once
#include <torch/torch.h>

#include <optional>
#include <string>

namespace megaton::checkpoint {

/// The dtype of storage class `qualname` ("torch.BFloat16Storage"), or nullopt for a name that is not one.
std::optional<torch::ScalarType> storage_dtype(const std::string& qualname);

/// The storage class of `dtype` ("torch.FloatStorage"). InternalError for a dtype torch has no typed storage for.
std::string storage_class(torch::ScalarType dtype);

}  // namespace megaton::checkpoint
