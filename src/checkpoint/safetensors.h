// The safetensors file format (Hugging Face): 8-byte little-endian header length N, N bytes of JSON
// {"__metadata__": {str: str}, "<name>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...},
// then the raw little-endian tensor bytes (offsets relative to the end of the header). The header is parsed and
// written with nlohmann-json; writing pads it with spaces to a multiple of 8 bytes.
#pragma once
#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace megaton::checkpoint {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

/// Writes `tensors` (CPU, any of F64/F32/F16/BF16/I64/I32/U8) in the given order. RuntimeError on I/O failure.
void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {});

/// Reads every tensor. DataError naming the file (and tensor) for a malformed header, an unknown dtype, offsets
/// outside the file or not matching the shape, a truncated file.
std::map<std::string, torch::Tensor> read_safetensors(const std::string& path);

/// Reads a Hugging Face model directory's weights: model.safetensors, or the shards listed by
/// model.safetensors.index.json. DataError when neither exists.
std::map<std::string, torch::Tensor> read_hf_weights(const std::string& dir);

}  // namespace megaton::checkpoint
