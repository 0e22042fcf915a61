// libFuzzer target: a DeepSpeed JSON config (--deepspeed_config) applied to a default training configuration:
// malformed or unsupported sections must be UsageErrors naming the key.
#include "cli/deepspeed_config.h"
#include "core/error.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = megaton::fuzz::write_scratch("ds_config.json", data, size);
  megaton::train::TrainConfig config;
  try {
    (void)megaton::cli::apply_deepspeed_config(path, config);
  } catch (const megaton::Error&) {
  }
  return 0;
}
