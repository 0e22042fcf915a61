// libFuzzer target: a Megatron .idx file (and a .bin of the size it claims) opened and read through
// MMapIndexedDataset: every malformed index must be a DataError, every item read must stay inside the .bin.
#include <string>
#include <vector>

#include "core/error.h"
#include "data/indexed_dataset.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace megaton;
  const std::string idx = fuzz::write_scratch("x.idx", data, size);
  // A .bin of 4 KiB: the index's pointers and sizes decide whether that suffices.
  static const std::vector<uint8_t> bin(4096, 7);
  fuzz::write_scratch("x.bin", bin.data(), bin.size());
  try {
    data::MMapIndexedDataset ds(idx.substr(0, idx.size() - 4));
    std::vector<int64_t> buf;
    for (size_t i = 0; i < ds.size() && i < 64; ++i) {
      buf = ds.get(i);
      if (!buf.empty()) (void)buf.back();
    }
  } catch (const Error&) {
  }
  return 0;
}
