// libFuzzer target: a Hugging Face config.json given to import-hf's from_hf (without weights): hostile or malformed
// sizes must be DataErrors naming the key, never a crash, a division by zero or an allocation for them.
#include <nlohmann/json.hpp>

#include "checkpoint/hf.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(data, data + size);
  } catch (const nlohmann::json::exception&) {
    return 0;  // import-hf reports invalid JSON itself before from_hf
  }
  try {
    (void)megaton::checkpoint::from_hf(config, {}, "config.json");
  } catch (const megaton::Error&) {
  }
  return 0;
}
