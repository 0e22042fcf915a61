// libFuzzer target: a .safetensors file read by read_safetensors (header length, JSON header, dtypes, shapes,
// offsets): malformed files must be DataErrors, never a crash or an allocation beyond the file.
#include "checkpoint/safetensors.h"
#include "core/error.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = megaton::fuzz::write_scratch("x.safetensors", data, size);
  try {
    (void)megaton::checkpoint::read_safetensors(path);
  } catch (const megaton::Error&) {
  }
  return 0;
}
