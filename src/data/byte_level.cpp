#include "data/byte_level.h"

#include "data/utf8.h"

namespace megaton::data {

namespace {

bool printable(uint32_t b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 324> from_cp{};  // code point (< 0x144) -> byte, or -1
  Tables() {
    from_cp.fill(-1);
    uint32_t n = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      to_cp[b] = printable(b) ? b : 256 + n++;
      from_cp[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;  // immutable after construction
  return t;
}

}  // namespace

uint32_t byte_to_code_point(uint8_t b) {
  return tables().to_cp[b];
}

bool byte_level_to_bytes(std::string_view key, std::string& out) {
  out.clear();
  const auto& t = tables();
  for (size_t i = 0; i < key.size();) {
    const uint32_t cp = next_code_point(key, i);
    if (cp >= t.from_cp.size() || t.from_cp[cp] < 0) return false;
    out.push_back(static_cast<char>(t.from_cp[cp]));
  }
  return true;
}

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  for (unsigned char b : bytes) append_utf8(out, tables().to_cp[b]);
  return out;
}

}  // namespace megaton::data
