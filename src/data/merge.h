// `megaton merge-data`: concatenates indexed datasets (Megatron's tools/merge_preprocessed_data.py, serial merge).
// The result is byte-identical to preprocessing the concatenated inputs: items and documents in order, doc_idx
// shifted, .bin bytes copied. Inputs must share one dtype.
#pragma once
#include <string>
#include <vector>

namespace megaton::data {

struct MergeStats {
  size_t items = 0;
  size_t documents = 0;
  int64_t tokens = 0;
};

/// Throws DataError naming the offending prefix when an input is missing, corrupt or of another dtype.
MergeStats merge_datasets(const std::vector<std::string>& inputs, const std::string& output_prefix);

}  // namespace megaton::data
