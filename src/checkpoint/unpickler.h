// A restricted reader of Python pickles (protocols 2-5) as torch.save writes them: it builds a value tree (py_value.h)
// and never runs pickled code. Globals are resolved against a fixed list of what checkpoints of torch, Megatron and
// DeepSpeed hold (torch tensors and storages, dtypes, OrderedDict, argparse.Namespace, numpy arrays and scalars,
// Megatron's and DeepSpeed's enums, namedtuples and records); any other global is refused with an error naming it.
#pragma once
#include <functional>
#include <string>

#include "checkpoint/py_value.h"

namespace megaton::checkpoint {

/// Returns the 1-D tensor of storage `key` with `numel` elements of `dtype` (torch's persistent_load).
using StorageLoader = std::function<torch::Tensor(const std::string& key, torch::ScalarType dtype, int64_t numel)>;

/// Reads the pickle in `data`. `where` names the file in errors (CheckpointError).
Py unpickle(const std::string& data, const StorageLoader& storages, const std::string& where);

}  // namespace megaton::checkpoint
