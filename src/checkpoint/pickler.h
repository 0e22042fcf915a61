// Writes a value tree (py_value.h) as a protocol-2 pickle the way torch.save does: tensors as
// torch._utils._rebuild_tensor_v2 over persistent storages, dicts, lists, tuples, argparse.Namespace and enum records
// by their class names. The storages are handed to the caller, who stores them beside the pickle (torch_file.h).
#pragma once
#include <string>
#include <vector>

#include "checkpoint/py_value.h"

namespace megaton::checkpoint {

struct Pickled {
  std::string data;                     // the pickle
  std::vector<torch::Tensor> storages;  // storage key = index; contiguous CPU tensors
};

/// Pickles `v`. Records are written as their class (GLOBAL module.name) called with their arguments (REDUCE), and
/// their state, when present, set by BUILD: argparse.Namespace(**state) and enum(value) come back as Python builds
/// them. Tensors are written contiguous, one storage each.
Pickled pickle(const Py& v);

}  // namespace megaton::checkpoint
