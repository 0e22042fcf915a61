// GPT-2's byte-level alphabet (`bytes_to_unicode` in openai/gpt-2 encoder.py): every byte 0..255 is shown as one
// printable code point, so vocab.json / tokenizer.json keys are strings of those code points. Megaton keeps tokens as
// raw bytes internally and converts the vocabulary keys once, on load.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace megaton::data {

/// The code point that stands for byte b (b in 0..255): '!'..'~', '¡'..'¬', '®'..'ÿ' map to themselves, the other
/// 68 bytes to U+0100 + n in byte order.
uint32_t byte_to_code_point(uint8_t b);

/// Decodes a byte-level key (e.g. "Ġthe") back to raw bytes (" the"). Returns false when a code point is not in the
/// byte-level alphabet (the key is then not a byte-level token, e.g. an added special token).
bool byte_level_to_bytes(std::string_view key, std::string& out);

/// The byte-level spelling of raw bytes (" the" -> "Ġthe").
std::string bytes_to_byte_level(std::string_view bytes);

}  // namespace megaton::data
