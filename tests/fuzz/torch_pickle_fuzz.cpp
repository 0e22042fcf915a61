// libFuzzer target: the pickle of a torch .pt file read by the restricted unpickler (opcodes, memo, marks, globals,
// tensors over storages, numpy arrays, records), then turned into JSON as the checkpoint readers do: malformed or
// hostile pickles must be CheckpointErrors, never a crash, a hang, unbounded recursion or an allocation beyond the
// input.
#include <torch/torch.h>

#include "checkpoint/py_value.h"
#include "checkpoint/unpickler.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string pickle(reinterpret_cast<const char*>(data), size);
  // Storages as load_torch_file serves them: a record of exactly numel elements (here: up to 65536, zero-filled).
  const megaton::checkpoint::StorageLoader storages = [](const std::string&, torch::ScalarType dtype, int64_t numel) {
    if (numel < 0 || numel > 65536) throw megaton::CheckpointError("storage size does not match its record");
    return torch::zeros({numel}, torch::TensorOptions().dtype(dtype));
  };
  try {
    const auto v = megaton::checkpoint::unpickle(pickle, storages, "fuzz.pkl");
    (void)megaton::checkpoint::py_to_json(v);
  } catch (const megaton::Error&) {
  }
  return 0;
}
