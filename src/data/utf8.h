// UTF-8 helpers for text entering the tokenizers. Input corpora may hold invalid UTF-8; we replace each maximal
// invalid subpart with U+FFFD exactly as the WHATWG decoder (Node's TextDecoder, `fs.readFileSync(f, 'utf8')`) and
// Python's `bytes.decode('utf-8', errors='replace')` do, so every later stage sees valid UTF-8.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace megaton::data {

/// True when `s` is well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF).
bool is_valid_utf8(std::string_view s);

/// `s` with every maximal ill-formed subsequence replaced by U+FFFD (EF BF BD); valid input is returned unchanged.
std::string sanitize_utf8(std::string_view s);

/// Appends the UTF-8 encoding of code point `cp` (< 0x110000) to `out`.
void append_utf8(std::string& out, uint32_t cp);

/// Decodes the code point starting at s[i] (valid UTF-8 assumed) and advances i past it.
uint32_t next_code_point(std::string_view s, size_t& i);

}  // namespace megaton::data
