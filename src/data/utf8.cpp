#include "data/utf8.h"

#ifdef MEGATON_HAVE_SIMDJSON
#include <simdjson.h>
#endif

namespace megaton::data {

namespace {

// Length of the well-formed sequence starting at s[i], or 0 when s[i] starts an ill-formed one; in that case
// `*bad_len` is the length of the maximal subpart to replace by one U+FFFD (WHATWG "maximal subpart" rule).
size_t sequence_length(std::string_view s, size_t i, size_t* bad_len) {
  const auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) return 1;
  size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1;
  } else if (b == 0xE0) {
    need = 2, lo = 0xA0;
  } else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) {
    need = 2;
  } else if (b == 0xED) {
    need = 2, hi = 0x9F;
  } else if (b == 0xF0) {
    need = 3, lo = 0x90;
  } else if (b >= 0xF1 && b <= 0xF3) {
    need = 3;
  } else if (b == 0xF4) {
    need = 3, hi = 0x8F;
  } else {
    *bad_len = 1;
    return 0;
  }
  size_t j = i + 1;
  for (size_t k = 0; k < need; ++k, ++j) {
    if (j >= s.size()) {
      *bad_len = j - i;
      return 0;
    }
    const auto c = static_cast<unsigned char>(s[j]);
    if (c < lo || c > hi) {
      *bad_len = j - i;
      return 0;
    }
    lo = 0x80, hi = 0xBF;
  }
  return need + 1;
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
#ifdef MEGATON_HAVE_SIMDJSON
  return simdjson::validate_utf8(s.data(), s.size());
#else
  size_t bad = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t n = sequence_length(s, i, &bad);
    if (n == 0) return false;
    i += n;
  }
  return true;
#endif
}

std::string sanitize_utf8(std::string_view s) {
  if (is_valid_utf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 16);
  for (size_t i = 0; i < s.size();) {
    size_t bad = 0;
    const size_t n = sequence_length(s, i, &bad);
    if (n) {
      out.append(s.data() + i, n);
      i += n;
    } else {
      out.append("\xEF\xBF\xBD");
      i += bad;
    }
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

uint32_t next_code_point(std::string_view s, size_t& i) {
  const auto b = static_cast<unsigned char>(s[i]);
  auto cont = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(s[i + k]) & 0x3F); };
  uint32_t cp;
  if (b < 0x80) {
    cp = b, i += 1;
  } else if (b < 0xE0) {
    cp = ((b & 0x1Fu) << 6) | cont(1), i += 2;
  } else if (b < 0xF0) {
    cp = ((b & 0x0Fu) << 12) | (cont(1) << 6) | cont(2), i += 3;
  } else {
    cp = ((b & 0x07u) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3), i += 4;
  }
  return cp;
}

}  // namespace megaton::data
