// Extracts string fields from one JSONL line (simdjson when available, else nlohmann-json). Lines with invalid
// UTF-8 are repaired (U+FFFD per maximal subpart) and lone UTF-16 surrogate escapes ("\ud800") become U+FFFD, which
// is what Node's JSON.parse + TextEncoder (the npm reference encoders) produce; anything else malformed is an error.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace megaton::data {

class JsonLineParser {
 public:
  explicit JsonLineParser(std::vector<std::string> keys);
  ~JsonLineParser();
  /// Parses `line` (readable for 64 bytes past its end: LineChunk guarantees it) and fills values[k] with the
  /// string of keys[k]. Returns "" on success, else the reason ("not valid JSON: ...", "no key 'text'", ...).
  /// The views stay valid until the next call.
  std::string parse(std::string_view line, std::vector<std::string_view>& values);

 private:
  std::string parse_once(std::string_view line, bool padded, std::vector<std::string_view>& values);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<std::string> keys_;
  std::string fixed_;
};

/// Replaces \uXXXX escapes of unpaired UTF-16 surrogates by \ufffd (JSON text in, JSON text out).
std::string replace_lone_surrogate_escapes(std::string_view json);

}  // namespace megaton::data
