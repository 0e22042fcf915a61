// libFuzzer target: one JSONL line through the preprocess line parser (simdjson, UTF-8 repair, lone surrogates).
#include <string>
#include <vector>

#include "core/error.h"
#include "data/json_line.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static megaton::data::JsonLineParser parser({"text", "meta"});
  std::string line(reinterpret_cast<const char*>(data), size);
  line.reserve(size + 64);  // the padding simdjson reads past the end, as preprocess's line chunks provide
  std::vector<std::string_view> values;
  const std::string err = parser.parse(line, values);
  if (err.empty() && values.size() != 2) __builtin_trap();  // a parsed line yields every key
  return 0;
}
